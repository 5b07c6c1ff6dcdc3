//! The excluded nodes a placeholder carries: what the job-mapper policy excluded plus what the
//! pod's placement rules exclude, limited to the nodes Slurm lists right now.

use std::collections::BTreeSet;

use super::verdict::Verdict;
use crate::slurm::{Job, compress_hostlist, expand_hostlist, expand_hostlists};

/// The names for the job's `excluded_nodes`, sorted. The policy's host lists are expanded to one
/// budget for all of them (as many names as one host list may have); lists that cannot be, malformed
/// or too many names together, are passed on as written (Slurm will say what is wrong with them).
/// Names Slurm does not list are left out (excluding them means nothing, and Slurm refuses unknown
/// names).
pub fn wanted(policy: &[String], verdict: &Verdict) -> Vec<String> {
    let known = |name: &String| verdict.eligible.contains(name) || verdict.excluded.contains_key(name);
    let mut names: BTreeSet<String> = verdict.excluded_names();
    match expand_hostlists(policy) {
        Ok(expanded) => names.extend(expanded.into_iter().filter(known)),
        Err(_) => names.extend(policy.iter().cloned()),
    }
    names.into_iter().collect()
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

/// Whether the job must be updated to exclude exactly `wanted`. Names Slurm no longer lists do not
/// count: excluding a deleted node means nothing, and slurmctld refuses every update of a job whose
/// excluded nodes name a deleted node (it keeps the job itself, across restarts too).
pub fn differs(job: &Job, wanted: &[String], verdict: &Verdict) -> bool {
    let known = |name: &String| verdict.eligible.contains(name) || verdict.excluded.contains_key(name);
    let current: BTreeSet<String> = current(job).into_iter().filter(known).collect();
    current != wanted.iter().cloned().collect()
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
        assert!(!differs(&Job::default(), &[], &verdict()));
        let deleted = Job { excluded_nodes: "n2,gone-9".into(), ..Default::default() };
        assert!(!differs(&deleted, &["n2".into()], &verdict()), "a deleted name needs no update");
        let listed = Job { excluded_nodes: "n2,n1".into(), ..Default::default() };
        assert_eq!(current(&listed), ["n1", "n2"].map(String::from).into());
    }
}
