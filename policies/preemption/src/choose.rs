//! The default choice of victims.
//!
//! Node by node: the preemptor needs `cpus`/`memory-mib`/`gpus` free on each of `node-count` nodes. On a
//! node, lower-priority candidates are taken lowest priority first (bigger first among equals, so fewer
//! are needed) until what is free covers the need, then any taken victim that turns out not to be needed
//! is given back. Nodes are ranked by the worst (highest) victim priority, then the number of victims;
//! the best `node-count` nodes win. A candidate at or above the preemptor's priority is never taken.

use std::cmp::Reverse;
use std::collections::BTreeSet;

use crate::sunk::policy::preemption_types::{
    Candidate, Node, PreemptMode, PreemptionDecision, Preemptor, Victim, WorkloadKind,
};

/// CPUs, MiB of memory and GPUs on one node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Resources {
    cpus: u64,
    memory_mib: u64,
    gpus: u64,
}

impl Resources {
    fn covers(self, need: Resources) -> bool {
        self.cpus >= need.cpus && self.memory_mib >= need.memory_mib && self.gpus >= need.gpus
    }

    fn plus(self, other: Resources) -> Resources {
        Resources {
            cpus: self.cpus + other.cpus,
            memory_mib: self.memory_mib + other.memory_mib,
            gpus: self.gpus + other.gpus,
        }
    }
}

fn held(candidate: &Candidate) -> Resources {
    Resources { cpus: candidate.cpus.into(), memory_mib: candidate.memory_mib, gpus: candidate.gpus.into() }
}

/// The victims that would free one node for the preemptor, best plan first when sorted.
#[derive(Debug)]
struct Plan<'a> {
    /// (worst victim priority, number of victims, sum of victim priorities): lower is better.
    cost: (u32, usize, u64),
    node: &'a str,
    victims: Vec<&'a Candidate>,
}

pub fn choose_victims(preemptor: &Preemptor, nodes: &[Node], candidates: &[Candidate]) -> PreemptionDecision {
    let need = Resources { cpus: preemptor.cpus.into(), memory_mib: preemptor.memory_mib, gpus: preemptor.gpus.into() };
    let wanted = usize::try_from(preemptor.node_count.max(1)).unwrap_or(usize::MAX);
    let mut plans: Vec<Plan> =
        nodes.iter().filter_map(|node| plan_node(node, need, preemptor.priority, candidates)).collect();
    if plans.len() < wanted {
        return PreemptionDecision {
            victims: vec![],
            reason: format!(
                "{} (priority {}) cannot run: only {} of the {wanted} nodes it needs can be freed by preempting \
                 jobs of lower priority",
                preemptor.name,
                preemptor.priority,
                plans.len()
            ),
        };
    }
    plans.sort_by(|a, b| a.cost.cmp(&b.cost).then_with(|| a.node.cmp(b.node)));
    plans.truncate(wanted);
    let mut seen = BTreeSet::new();
    let victims: Vec<&Candidate> =
        plans.iter().flat_map(|plan| plan.victims.iter().copied()).filter(|c| seen.insert(c.job_id)).collect();
    let chosen_nodes: Vec<&str> = plans.iter().map(|plan| plan.node).collect();
    if victims.is_empty() {
        return PreemptionDecision {
            victims: vec![],
            reason: format!("{} fits on {} without preempting anything", preemptor.name, chosen_nodes.join(",")),
        };
    }
    let named: Vec<String> =
        victims.iter().map(|c| format!("{} ({}, priority {})", c.job_id, c.name, c.priority)).collect();
    PreemptionDecision {
        reason: format!(
            "preempting {} on {} for {} (priority {}): lowest priority first, fewest victims",
            named.join(", "),
            chosen_nodes.join(","),
            preemptor.name,
            preemptor.priority
        ),
        victims: victims.into_iter().map(victim).collect(),
    }
}

/// The fewest lowest-priority victims on `node` that make room for `need`, or `None` if even all
/// lower-priority jobs there would not.
fn plan_node<'a>(node: &'a Node, need: Resources, priority: u32, candidates: &'a [Candidate]) -> Option<Plan<'a>> {
    let free = Resources { cpus: node.free_cpus.into(), memory_mib: node.free_memory_mib, gpus: node.free_gpus.into() };
    let mut eligible: Vec<&Candidate> =
        candidates.iter().filter(|c| c.priority < priority && c.nodes.contains(&node.name)).collect();
    eligible.sort_by_key(|c| (c.priority, Reverse(c.gpus), Reverse(c.cpus), Reverse(c.memory_mib), c.job_id));

    let mut taken = Vec::new();
    let mut room = free;
    for candidate in eligible {
        if room.covers(need) {
            break;
        }
        room = room.plus(held(candidate));
        taken.push(candidate);
    }
    if !room.covers(need) {
        return None;
    }
    // Give back, highest priority first, any victim the others already make room without.
    for index in (0..taken.len()).rev() {
        let without = taken.iter().enumerate().filter(|(i, _)| *i != index).fold(free, |sum, (_, c)| sum.plus(held(c)));
        if without.covers(need) {
            taken.remove(index);
        }
    }
    let worst = taken.iter().map(|c| c.priority).max().unwrap_or(0);
    let total = taken.iter().map(|c| u64::from(c.priority)).sum();
    Some(Plan { cost: (worst, taken.len(), total), node: &node.name, victims: taken })
}

/// How a victim goes: a pod is evicted with its grace period; a Slurm job that may be requeued is
/// (it runs again later, as under Slurm's own `PreemptMode=REQUEUE`), any other is cancelled (Slurm's
/// KillWait is their grace).
fn victim(candidate: &Candidate) -> Victim {
    let (mode, grace_seconds) = match candidate.kind {
        WorkloadKind::Pod => (PreemptMode::Evict, candidate.grace_seconds),
        WorkloadKind::SlurmJob if candidate.requeue_allowed => (PreemptMode::Requeue, 0),
        WorkloadKind::SlurmJob => (PreemptMode::Cancel, 0),
    };
    Victim { job_id: candidate.job_id, mode, grace_seconds }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preemptor(priority: u32, node_count: u32, cpus: u32) -> Preemptor {
        Preemptor {
            kind: WorkloadKind::Pod,
            name: "ml/urgent".into(),
            job_id: None,
            priority,
            partition: "gpu".into(),
            node_count,
            cpus,
            memory_mib: 1024,
            gpus: 0,
        }
    }

    fn node(name: &str, free_cpus: u32) -> Node {
        Node { name: name.into(), free_cpus, free_memory_mib: 1 << 20, free_gpus: 0 }
    }

    fn job(job_id: u32, priority: u32, node: &str, cpus: u32) -> Candidate {
        Candidate {
            job_id,
            kind: WorkloadKind::SlurmJob,
            name: format!("job-{job_id}"),
            user: "alice".into(),
            account: "research".into(),
            partition: "gpu".into(),
            priority,
            nodes: vec![node.into()],
            cpus,
            memory_mib: 1024,
            gpus: 0,
            run_seconds: 60,
            requeue_allowed: false,
            grace_seconds: 0,
        }
    }

    fn ids(decision: &PreemptionDecision) -> Vec<u32> {
        decision.victims.iter().map(|v| v.job_id).collect()
    }

    #[test]
    fn lowest_priority_goes_first() {
        let candidates = [job(1, 50, "n1", 4), job(2, 10, "n1", 4)];
        let decision = choose_victims(&preemptor(100, 1, 4), &[node("n1", 0)], &candidates);
        assert_eq!(ids(&decision), [2]);
        assert!(decision.reason.contains("lowest priority first"), "{}", decision.reason);
    }

    #[test]
    fn never_at_or_above_the_preemptors_priority() {
        let candidates = [job(1, 100, "n1", 4), job(2, 200, "n1", 4)];
        let decision = choose_victims(&preemptor(100, 1, 4), &[node("n1", 0)], &candidates);
        assert!(decision.victims.is_empty());
        assert!(decision.reason.contains("cannot run"), "{}", decision.reason);
    }

    #[test]
    fn fewest_victims_among_equals_and_unneeded_victims_are_given_back() {
        // Two small jobs would do, but one big one of the same priority frees enough alone.
        let candidates = [job(1, 10, "n1", 2), job(2, 10, "n1", 2), job(3, 10, "n1", 4)];
        assert_eq!(ids(&choose_victims(&preemptor(100, 1, 4), &[node("n1", 0)], &candidates)), [3]);
        // A lowest-priority job too small to matter once a bigger one is taken is given back.
        let candidates = [job(1, 5, "n1", 1), job(2, 10, "n1", 4)];
        assert_eq!(ids(&choose_victims(&preemptor(100, 1, 4), &[node("n1", 0)], &candidates)), [2]);
    }

    #[test]
    fn the_node_with_the_cheapest_victims_wins() {
        let candidates = [job(1, 50, "n1", 4), job(2, 20, "n2", 2), job(3, 20, "n2", 2)];
        let decision = choose_victims(&preemptor(100, 1, 4), &[node("n1", 0), node("n2", 0)], &candidates);
        assert_eq!(ids(&decision), [2, 3]);
        let decision = choose_victims(&preemptor(100, 1, 4), &[node("n1", 0), node("n2", 4)], &candidates);
        assert!(decision.victims.is_empty(), "n2 is free already: {decision:?}");
        assert!(decision.reason.contains("without preempting"));
    }

    #[test]
    fn multi_node_preemptors_get_victims_on_enough_nodes() {
        let mut wide = job(9, 5, "n1", 4);
        wide.nodes.push("n2".into());
        let candidates = [wide, job(2, 30, "n3", 4)];
        let nodes = [node("n1", 0), node("n2", 0), node("n3", 0)];
        assert_eq!(ids(&choose_victims(&preemptor(100, 2, 4), &nodes, &candidates)), [9]);
        assert_eq!(ids(&choose_victims(&preemptor(100, 3, 4), &nodes, &candidates)), [9, 2]);
        assert!(choose_victims(&preemptor(100, 4, 4), &nodes, &candidates).victims.is_empty());
    }

    #[test]
    fn pods_are_evicted_with_grace_and_slurm_jobs_requeued_where_they_may_be() {
        let mut pod = job(1, 10, "n1", 2);
        pod.kind = WorkloadKind::Pod;
        pod.grace_seconds = 25;
        let mut requeueable = job(2, 10, "n1", 2);
        requeueable.requeue_allowed = true;
        let plain = job(3, 10, "n1", 2);
        let decision = choose_victims(&preemptor(100, 1, 6), &[node("n1", 0)], &[pod, requeueable, plain]);
        let modes: Vec<_> = decision.victims.iter().map(|v| (v.job_id, v.mode, v.grace_seconds)).collect();
        assert!(modes.contains(&(1, PreemptMode::Evict, 25)), "{modes:?}");
        assert!(modes.contains(&(2, PreemptMode::Requeue, 0)), "{modes:?}");
        assert!(modes.contains(&(3, PreemptMode::Cancel, 0)), "{modes:?}");
    }
}
