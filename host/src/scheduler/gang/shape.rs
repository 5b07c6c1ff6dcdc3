//! The one job of a gang whose members differ in size. Slurm gives each task of a multi-node job a
//! node of the same size, and which member lands on which node is only known once the job runs, so
//! every node holds the largest member's CPUs, memory and generic resources (each resource on its
//! own): whichever node a member is bound to holds at least what the kubelet will count for it.
//! Everything else the members ask Slurm for must agree, or there is no one job to submit.

use std::collections::{BTreeMap, BTreeSet};

use crate::policy::JobRequest;

/// What the members' requests make together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GangShape {
    /// The job to submit, sized for the largest member.
    Job(Box<JobRequest>),
    /// `member` asks Slurm for another `field` than the first member does.
    Differs { member: String, field: &'static str },
}

/// The gang's job from its members' requests (`(member name, request)`, leader first).
pub fn gang_shape(requests: &[(String, JobRequest)]) -> GangShape {
    let Some(((_, leader), rest)) = requests.split_first() else {
        return GangShape::Differs { member: String::new(), field: "members" };
    };
    let mut job = leader.clone();
    let mut excluded: BTreeSet<String> = leader.excluded_nodes.iter().cloned().collect();
    for (member, request) in rest {
        if let Some(field) = differing_option(leader, request) {
            return GangShape::Differs { member: member.clone(), field };
        }
        job.cpus = job.cpus.max(request.cpus);
        job.memory_mib = job.memory_mib.max(request.memory_mib);
        job.tres_per_node = largest_tres(job.tres_per_node.as_deref(), request.tres_per_node.as_deref());
        excluded.extend(request.excluded_nodes.iter().cloned());
    }
    job.excluded_nodes = excluded.into_iter().collect();
    GangShape::Job(Box::new(job))
}

/// The first option, other than sizes and excluded nodes, on which `b` differs from `a`.
fn differing_option(a: &JobRequest, b: &JobRequest) -> Option<&'static str> {
    let options = [
        ("partition", a.partition == b.partition),
        ("account", a.account == b.account),
        ("qos", a.qos == b.qos),
        ("reservation", a.reservation == b.reservation),
        ("comment", a.comment == b.comment),
        ("constraints", a.constraints == b.constraints),
        ("prefer", a.prefer == b.prefer),
        ("exclusive", a.exclusive == b.exclusive),
        ("required nodes", a.required_nodes == b.required_nodes),
        ("priority", a.priority == b.priority),
        ("user id", a.user_id == b.user_id),
        ("group id", a.group_id == b.group_id),
        ("working directory", a.current_working_directory == b.current_working_directory),
        ("time limit", a.time_limit_minutes == b.time_limit_minutes),
    ];
    options.into_iter().find(|(_, same)| !same).map(|(field, _)| field)
}

/// The larger count of each generic resource of two `tres_per_node` lists (`gres/gpu:2,gres/shard:1`).
fn largest_tres(a: Option<&str>, b: Option<&str>) -> Option<String> {
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for entry in [a, b].into_iter().flatten().flat_map(|list| list.split(',')).filter(|entry| !entry.is_empty()) {
        // `gres/gpu:a100:2`: the count is the last part; `gres/gpu` alone is one.
        let (name, count) = match entry.rsplit_once(':').map(|(name, count)| (name, count.parse::<u64>())) {
            Some((name, Ok(count))) => (name, count),
            _ => (entry, 1),
        };
        let held = counts.entry(name).or_default();
        *held = (*held).max(count);
    }
    let list: Vec<String> = counts.into_iter().map(|(name, count)| format!("{name}:{count}")).collect();
    (!list.is_empty()).then(|| list.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Exclusive;

    fn request(cpus: u32, memory_mib: u64, tres: Option<&str>) -> JobRequest {
        let json = serde_json::json!({"partition": "batch", "cpus": cpus, "memory_mib": memory_mib,
            "tres_per_node": tres, "excluded_nodes": [], "required_nodes": []});
        serde_json::from_value(json).expect("a job request")
    }

    fn named(requests: Vec<JobRequest>) -> Vec<(String, JobRequest)> {
        requests.into_iter().enumerate().map(|(index, request)| (format!("m{index}"), request)).collect()
    }

    fn sized(shape: GangShape) -> (u32, u64, Option<String>) {
        match shape {
            GangShape::Job(job) => (job.cpus, job.memory_mib, job.tres_per_node),
            differs => panic!("{differs:?}"),
        }
    }

    #[test]
    fn every_node_holds_the_largest_member_resource_by_resource() {
        let tres = |s: &str| Some(s.to_owned());
        // (members, (CPUs, MiB, tres_per_node) each node holds)
        let cases = [
            (vec![request(1, 256, None), request(1, 256, None)], (1, 256, None)),
            (vec![request(1, 256, None), request(2, 128, Some("gres/gpu:2"))], (2, 256, tres("gres/gpu:2"))),
            (
                vec![request(4, 64, Some("gres/gpu:1")), request(1, 512, Some("gres/gpu:3"))],
                (4, 512, tres("gres/gpu:3")),
            ),
            (
                vec![request(1, 1, Some("gres/gpu:a100:2,gres/shard:1")), request(1, 1, Some("gres/shard:4"))],
                (1, 1, tres("gres/gpu:a100:2,gres/shard:4")),
            ),
            (vec![request(1, 1, Some("gres/gpu")), request(1, 1, None)], (1, 1, tres("gres/gpu:1"))),
        ];
        for (members, expected) in cases {
            assert_eq!(sized(gang_shape(&named(members.clone()))), expected, "{members:?}");
        }
    }

    #[test]
    fn excluded_nodes_are_joined() {
        let mut a = request(1, 1, None);
        a.excluded_nodes = vec!["n1".into()];
        let mut b = request(1, 1, None);
        b.excluded_nodes = vec!["n2".into(), "n1".into()];
        let GangShape::Job(job) = gang_shape(&named(vec![a, b])) else { panic!("one job") };
        assert_eq!(job.excluded_nodes, ["n1", "n2"]);
    }

    #[test]
    fn a_member_asking_for_another_option_is_named() {
        let mut other_partition = request(1, 1, None);
        other_partition.partition = Some("gpu".into());
        let mut whole_node = request(1, 1, None);
        whole_node.exclusive = Some(Exclusive::None);
        let cases = [(other_partition, "partition"), (whole_node, "exclusive")];
        for (differing, field) in cases {
            let members = named(vec![request(1, 1, None), request(2, 1, None), differing]);
            assert_eq!(gang_shape(&members), GangShape::Differs { member: "m2".into(), field });
        }
    }
}
