//! The group's one Slurm job, decided without I/O: whether the nodes every member may use are enough
//! for it, and what it asks Slurm for: one node and one task per member, the request the members
//! share (`shape` made sure they are alike), no node any member may not use, and a link in its admin
//! comment naming every member, so each finds the job and its node again after a restart.

use crate::policy::JobRequest;
use crate::scheduler::link::{GangLink, Installation, PodKey};
use crate::scheduler::placeholder::{self, PlaceholderKind};
use crate::scheduler::placement::Verdict;
use crate::scheduler::placement::exclusions;
use crate::slurm::JobDescription;

/// Why the group waits for nodes, if it does. Slurm fails a job asking for more nodes than it may
/// use, so the group waits unsubmitted: an autoscaler adding Nodes, or a NodeSet turning them into
/// Slurm nodes, brings it back.
pub fn short_of_nodes(group: &str, size: usize, verdict: &Verdict) -> Option<String> {
    let eligible = verdict.eligible.len();
    if eligible >= size {
        return None;
    }
    let known = eligible + verdict.excluded.len();
    let short = format!(
        "pod group {group} needs {size} Slurm nodes, one per pod, and {eligible} of the cluster's {known} may take its pods"
    );
    if verdict.excluded.is_empty() {
        return Some(short);
    }
    Some(format!("{short}: {}", verdict.why_excluded()))
}

/// What the group is for Slurm: one placeholder, owned by its first member, for all of `members`.
pub struct GangJob<'a> {
    pub namespace: &'a str,
    pub group: &'a str,
    /// Every member, oldest first.
    pub members: &'a [PodKey],
    /// The request every member's pod maps to.
    pub request: JobRequest,
    /// Where every member may run.
    pub verdict: &'a Verdict,
}

/// The group's job as submitted.
pub fn description(job: GangJob, kind: PlaceholderKind, installation: &Installation) -> JobDescription {
    let GangJob { namespace, group, members, mut request, verdict } = job;
    request.excluded_nodes = exclusions::for_job(&request.excluded_nodes, verdict);
    let mut description = placeholder::job_description(&members[0], request, kind, installation);
    description.name = format!("{namespace}/{group}");
    let link = GangLink::new(namespace, group, members.to_vec());
    description.admin_comment = Some(installation.sign(link.render()));
    let nodes = u32::try_from(members.len()).unwrap_or(u32::MAX);
    description.minimum_nodes = Some(nodes);
    description.maximum_nodes = Some(nodes);
    description.tasks = Some(nodes);
    description.tasks_per_node = Some(1);
    description
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;

    fn verdict(eligible: &[&str], excluded: &[(&str, &str)]) -> Verdict {
        Verdict {
            eligible: eligible.iter().map(|node| node.to_string()).collect::<BTreeSet<_>>(),
            excluded: excluded
                .iter()
                .map(|(node, why)| (node.to_string(), why.to_string()))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    #[test]
    fn a_group_waits_for_as_many_nodes_as_it_has_pods() {
        let rows = [
            ("enough", verdict(&["s1", "s2"], &[]), None),
            (
                "too few, none excluded",
                verdict(&["s1"], &[]),
                Some("pod group g needs 2 Slurm nodes, one per pod, and 1 of the cluster's 1 may take its pods"),
            ),
            (
                "too few, one excluded",
                verdict(&["s1"], &[("s2", "tainted")]),
                Some(
                    "pod group g needs 2 Slurm nodes, one per pod, and 1 of the cluster's 2 may take its pods: s2: tainted",
                ),
            ),
        ];
        for (name, verdict, expected) in rows {
            assert_eq!(short_of_nodes("g", 2, &verdict).as_deref(), expected, "{name}");
        }
    }

    #[test]
    fn a_gang_is_one_job_of_a_node_and_a_task_per_member_excluding_what_any_may_not_use() {
        let key = |name: &str| PodKey { namespace: "ml".into(), name: name.into(), uid: format!("uid-{name}") };
        let members = [key("a"), key("b")];
        let request: JobRequest = serde_json::from_value(serde_json::json!({"partition": "batch", "cpus": 2,
            "memory_mib": 512, "excluded_nodes": [], "required_nodes": []}))
        .expect("a job request");
        let verdict = verdict(&["s1", "s2"], &[("s3", "tainted")]);
        let installation = Installation::new("sunk", "test-cluster");
        let job = GangJob { namespace: "ml", group: "g", members: &members, request, verdict: &verdict };
        let description = description(job, PlaceholderKind::Batch, &installation);
        assert_eq!(description.name, "ml/g");
        assert_eq!(
            (description.minimum_nodes, description.maximum_nodes, description.tasks, description.tasks_per_node),
            (Some(2), Some(2), Some(2), Some(1))
        );
        assert_eq!(description.excluded_nodes, vec!["s3".to_string()]);
        let link = GangLink::new("ml", "g", members.to_vec()).render();
        assert_eq!(description.admin_comment, Some(installation.sign(link)));
    }
}
