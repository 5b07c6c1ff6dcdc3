//! The excluded nodes a placeholder carries: what the job-mapper policy excluded plus what the
//! pod's placement rules exclude, limited to the nodes Slurm lists right now.
//!
//! A verdict at a large site excludes thousands of nodes, and every waiting pod's job is compared
//! with it whenever a Node changes: the comparison borrows the verdict's names and reads the job's
//! host list name by name, so that it allocates nothing per node.

use std::borrow::Cow;
use std::collections::BTreeSet;

use super::verdict::Verdict;
use crate::slurm::{Job, compress_hostlist, expand_hostlist, expand_hostlists, for_each_host};

/// The names for the job's `excluded_nodes`, sorted. The policy's host lists are expanded to one
/// budget for all of them (as many names as one host list may have); lists that cannot be, malformed
/// or too many names together, are passed on as written (Slurm will say what is wrong with them).
/// Names Slurm does not list are left out (excluding them means nothing, and Slurm refuses unknown
/// names).
pub fn wanted<'a>(policy: &'a [String], verdict: &'a Verdict) -> Vec<Cow<'a, str>> {
    let ruled = verdict.excluded.keys().map(|name| Cow::Borrowed(name.as_str()));
    if policy.is_empty() {
        // Sorted and distinct already.
        return ruled.collect();
    }
    let mut names: BTreeSet<Cow<'a, str>> = ruled.collect();
    match expand_hostlists(policy) {
        Ok(expanded) => names.extend(expanded.into_iter().filter(|name| known(verdict, name)).map(Cow::Owned)),
        Err(_) => names.extend(policy.iter().map(|list| Cow::Borrowed(list.as_str()))),
    }
    names.into_iter().collect()
}

/// Whether Slurm lists the node (the verdict names every node it lists).
fn known(verdict: &Verdict, name: &str) -> bool {
    verdict.eligible.contains(name) || verdict.excluded.contains_key(name)
}

/// [`wanted`] as a submission carries it: a host list, so that a job excluding 5,000 nodes holds one
/// short item (in the request, the job cache and slurmctld) rather than 5,000 names.
pub fn for_job(policy: &[String], verdict: &Verdict) -> Vec<String> {
    compress_hostlist(&wanted(policy, verdict))
}

/// The names a job excludes now.
pub fn current(job: &Job) -> BTreeSet<String> {
    expand_hostlist(&job.excluded_nodes)
        .unwrap_or_else(|_| job.excluded_nodes.split(',').map(str::to_owned).collect())
        .into_iter()
        .filter(|name| !name.is_empty())
        .collect()
}

/// Whether the job must be updated to exclude exactly `wanted` (sorted, as [`wanted`] gives it).
/// Names Slurm no longer lists do not count: excluding a deleted node means nothing, and slurmctld
/// refuses every update of a job whose excluded nodes name a deleted node (it keeps the job itself,
/// across restarts too).
pub fn differs(job: &Job, wanted: &[Cow<'_, str>], verdict: &Verdict) -> bool {
    let (mut matched, mut unwanted) = (0, false);
    let mut compare = |name: &str| {
        if known(verdict, name) {
            match wanted.binary_search_by(|wanted| wanted.as_ref().cmp(name)) {
                Ok(_) => matched += 1,
                Err(_) => unwanted = true,
            }
        }
    };
    if for_each_host(&job.excluded_nodes, &mut compare).is_err() {
        job.excluded_nodes.split(',').filter(|name| !name.is_empty()).for_each(&mut compare);
    }
    unwanted || matched != wanted.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict() -> Verdict {
        Verdict {
            excluded: [("n2".to_string(), "tainted".to_string())].into(),
            eligible: ["n1", "n3"].map(String::from).into(),
        }
    }

    #[test]
    fn joins_the_policys_known_names_with_the_placement_rules() {
        let policy = ["n[1-2]".to_string(), "gone-9".to_string()];
        assert_eq!(wanted(&policy, &verdict()), ["n1", "n2"]);
        assert_eq!(wanted(&[], &verdict()), ["n2"]);
        assert_eq!(wanted(&["bad[".to_string()], &verdict()), ["bad[", "n2"]);
        assert_eq!(for_job(&["n[1-3]".to_string()], &verdict()), ["n[1-3]"]);
        // Past one budget together, the lists go to Slurm as written, none of them expanded.
        let huge: Vec<String> = (0..7200).map(|_| "n[0-65535]".to_string()).collect();
        assert_eq!(wanted(&huge, &verdict()), ["n2", "n[0-65535]"]);
    }

    #[test]
    fn compares_with_the_job_whatever_its_spelling() {
        let job = Job { excluded_nodes: "n[1-2]".into(), ..Default::default() };
        assert!(!differs(&job, &["n1".into(), "n2".into()], &verdict()));
        assert!(differs(&job, &["n2".into()], &verdict()));
        assert!(differs(&job, &["n1".into(), "n2".into(), "n3".into()], &verdict()), "one short");
        let reordered = Job { excluded_nodes: "n2,n1".into(), ..Default::default() };
        assert!(!differs(&reordered, &["n1".into(), "n2".into()], &verdict()));
        let unreadable = Job { excluded_nodes: "n2,bad[".into(), ..Default::default() };
        assert!(!differs(&unreadable, &["n2".into()], &verdict()), "read as a comma list");
        let refused_late = Job { excluded_nodes: "n[1-2],m[3-1]".into(), ..Default::default() };
        assert!(differs(&refused_late, &["n1".into(), "n2".into()], &verdict()), "read as a comma list, whole");
        assert!(!differs(&Job::default(), &[], &verdict()));
        let deleted = Job { excluded_nodes: "n2,gone-9".into(), ..Default::default() };
        assert!(!differs(&deleted, &["n2".into()], &verdict()), "a deleted name needs no update");
        let listed = Job { excluded_nodes: "n2,n1".into(), ..Default::default() };
        assert_eq!(current(&listed), ["n1", "n2"].map(String::from).into());
    }
}
