//! Which running jobs make room for a waiting one, leaving the protected accounts' jobs alone.
//!
//! The protected accounts' jobs are taken out of the running first; then, on every node that could
//! serve the waiting work, the lowest-priority jobs below its priority are taken until they free
//! enough. The nodes that cost least (the highest victim priority, then the number of victims) win.

use std::collections::BTreeSet;

use crate::sunk::policy::preemption_types::{
    Candidate, Node, PreemptMode, PreemptionDecision, Preemptor, Victim, WorkloadKind,
};

/// The accounts whose jobs are never preempted.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Protected(BTreeSet<String>);

impl Protected {
    /// One Slurm account a line; `#` starts a comment; blank lines are ignored.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut accounts = BTreeSet::new();
        for (index, line) in text.lines().enumerate() {
            let account = line.split('#').next().unwrap_or_default().trim();
            if account.is_empty() {
                continue;
            }
            if !account.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
                return Err(format!("line {}: `{account}` is not a Slurm account name", index + 1));
            }
            accounts.insert(account.to_owned());
        }
        Ok(Self(accounts))
    }

    fn covers(&self, candidate: &Candidate) -> bool {
        self.0.contains(&candidate.account)
    }
}

/// (CPUs, MiB, GPUs) on one node.
type Room = (u64, u64, u64);

fn add(room: Room, candidate: &Candidate) -> Room {
    (room.0 + u64::from(candidate.cpus), room.1 + candidate.memory_mib, room.2 + u64::from(candidate.gpus))
}

fn fits(room: Room, need: Room) -> bool {
    room.0 >= need.0 && room.1 >= need.1 && room.2 >= need.2
}

pub fn choose(
    protected: &Protected,
    preemptor: &Preemptor,
    nodes: &[Node],
    candidates: &[Candidate],
) -> PreemptionDecision {
    let below: Vec<&Candidate> = candidates.iter().filter(|c| c.priority < preemptor.priority).collect();
    let (spared, open): (Vec<&Candidate>, Vec<&Candidate>) = below.into_iter().partition(|c| protected.covers(c));
    let need: Room = (preemptor.cpus.into(), preemptor.memory_mib, preemptor.gpus.into());

    let mut plans: Vec<((u32, usize), &str, Vec<&Candidate>)> = nodes
        .iter()
        .filter_map(|node| {
            let mut here: Vec<&Candidate> = open.iter().copied().filter(|c| c.nodes.contains(&node.name)).collect();
            here.sort_by_key(|c| (c.priority, c.job_id));
            let mut room: Room = (node.free_cpus.into(), node.free_memory_mib, node.free_gpus.into());
            let taken: Vec<&Candidate> = here
                .into_iter()
                .take_while(|c| {
                    let short = !fits(room, need);
                    room = add(room, c);
                    short
                })
                .collect();
            let freed = taken
                .iter()
                .fold((node.free_cpus.into(), node.free_memory_mib, node.free_gpus.into()), |r, c| add(r, c));
            fits(freed, need).then(|| {
                ((taken.iter().map(|c| c.priority).max().unwrap_or(0), taken.len()), node.name.as_str(), taken)
            })
        })
        .collect();
    let wanted = usize::try_from(preemptor.node_count.max(1)).unwrap_or(usize::MAX);
    let spared_note = spared_accounts(&spared);
    if plans.len() < wanted {
        return PreemptionDecision {
            victims: vec![],
            reason: format!(
                "preempting nobody for {}: only {} of the {wanted} nodes it needs can be freed by jobs of lower priority{spared_note}",
                preemptor.name,
                plans.len()
            ),
        };
    }
    plans.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(b.1)));
    let mut seen = BTreeSet::new();
    let victims: Vec<&Candidate> = plans
        .iter()
        .take(wanted)
        .flat_map(|(_, _, taken)| taken.iter().copied())
        .filter(|c| seen.insert(c.job_id))
        .collect();
    let named: Vec<String> = victims
        .iter()
        .map(|c| format!("{} ({}, account {}, priority {})", c.job_id, c.name, c.account, c.priority))
        .collect();
    PreemptionDecision {
        reason: format!("preempting [{}] for {}{spared_note}", named.join(", "), preemptor.name),
        victims: victims.into_iter().map(victim).collect(),
    }
}

/// `; spared the protected accounts physics` when protection kept lower-priority jobs out.
fn spared_accounts(spared: &[&Candidate]) -> String {
    let accounts: BTreeSet<&str> = spared.iter().map(|c| c.account.as_str()).collect();
    if accounts.is_empty() {
        return String::new();
    }
    format!("; spared the protected accounts {}", accounts.into_iter().collect::<Vec<_>>().join(", "))
}

/// Pods are evicted with their grace period; Slurm jobs cancelled, which every Slurm can do (a
/// requeue needs `requeue_allowed`).
fn victim(candidate: &Candidate) -> Victim {
    match candidate.kind {
        WorkloadKind::Pod => {
            Victim { job_id: candidate.job_id, mode: PreemptMode::Evict, grace_seconds: candidate.grace_seconds }
        }
        WorkloadKind::SlurmJob => Victim { job_id: candidate.job_id, mode: PreemptMode::Cancel, grace_seconds: 0 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(priority: u32) -> Preemptor {
        Preemptor {
            kind: WorkloadKind::Pod,
            name: "ml/urgent".into(),
            job_id: Some(9),
            priority,
            partition: "batch".into(),
            node_count: 1,
            cpus: 2,
            memory_mib: 256,
            gpus: 0,
        }
    }

    fn full(name: &str) -> Node {
        Node { name: name.into(), free_cpus: 0, free_memory_mib: 0, free_gpus: 0 }
    }

    fn running(job_id: u32, account: &str, priority: u32, node: &str) -> Candidate {
        Candidate {
            job_id,
            kind: WorkloadKind::SlurmJob,
            name: format!("job-{job_id}"),
            user: "alice".into(),
            account: account.into(),
            partition: "batch".into(),
            priority,
            nodes: vec![node.into()],
            cpus: 2,
            memory_mib: 512,
            gpus: 0,
            run_seconds: 60,
            requeue_allowed: true,
            grace_seconds: 0,
        }
    }

    fn ids(decision: &PreemptionDecision) -> Vec<u32> {
        decision.victims.iter().map(|v| v.job_id).collect()
    }

    #[test]
    fn the_list_parses_with_comments_and_refuses_what_is_no_account() {
        let parsed = Protected::parse("# never these\nphysics\n\n  climate  # the big one\n").unwrap();
        assert_eq!(parsed, Protected(["climate", "physics"].map(String::from).into()));
        assert!(Protected::parse("physics\nbad account\n").unwrap_err().contains("line 2"));
    }

    #[test]
    fn a_protected_accounts_job_is_skipped_for_the_next_lowest() {
        let jobs = [running(1, "physics", 10, "n1"), running(2, "bio", 20, "n2")];
        let nodes = [full("n1"), full("n2")];
        let protected = Protected::parse("physics").unwrap();
        let decision = choose(&protected, &waiting(100), &nodes, &jobs);
        assert_eq!(ids(&decision), [2]);
        assert_eq!(decision.victims[0].mode, PreemptMode::Cancel);
        assert!(decision.reason.contains("spared the protected accounts physics"), "{}", decision.reason);
        assert_eq!(ids(&choose(&Protected::default(), &waiting(100), &nodes, &jobs)), [1], "unprotected: the lowest");
    }

    #[test]
    fn nobody_when_only_protected_or_higher_priority_jobs_could_make_room() {
        let nodes = [full("n1")];
        let protected = Protected::parse("physics").unwrap();
        let decision = choose(&protected, &waiting(100), &nodes, &[running(1, "physics", 10, "n1")]);
        assert!(decision.victims.is_empty());
        assert!(decision.reason.contains("spared the protected accounts physics"), "{}", decision.reason);
        let decision = choose(&protected, &waiting(100), &nodes, &[running(2, "bio", 100, "n1")]);
        assert!(decision.victims.is_empty(), "never at the preemptor's own priority");
    }

    #[test]
    fn pods_are_evicted_with_their_grace_and_only_what_is_needed_goes() {
        let mut pod = running(3, "bio", 5, "n1");
        pod.kind = WorkloadKind::Pod;
        pod.grace_seconds = 20;
        let decision = choose(&Protected::default(), &waiting(100), &[full("n1")], &[pod, running(4, "bio", 6, "n1")]);
        assert_eq!(decision.victims, [Victim { job_id: 3, mode: PreemptMode::Evict, grace_seconds: 20 }]);
    }
}
