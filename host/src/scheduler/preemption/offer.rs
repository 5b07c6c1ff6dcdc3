//! What the preemption policy is shown: the waiting job, the nodes that could serve it with what is
//! free on each, and the running jobs there that could make room and may be preempted (Slurm's own
//! rules let them be, or the waiting pod's grant names them: see `judge` in `mod.rs`). Pure:
//! everything comes from one Slurm node listing, one job listing and one judgement per job, so the
//! same views always give the same offer.

use std::collections::{BTreeSet, HashMap};

use crate::policy::worlds::ChooseVictimsInput;
use crate::policy::{Candidate, Node as PolicyNode, Preemptor, WorkloadKind};
use crate::slurm::{Job, JobState, Node, Resources, expand_hostlist};

use super::super::link::{PodKey, linked_pods};
use super::slurm_rules::{Protection, Verdict};

/// The views an offer is drawn from.
pub struct Views<'a> {
    /// Slurm's nodes, as last listed.
    pub nodes: Vec<&'a Node>,
    /// Every job holding nodes now.
    pub holding: &'a [Job],
    /// Nodes the waiting job may use (its placement rules and its own exclusions).
    pub allowed: &'a BTreeSet<String>,
    /// Jobs already on their way out (cancelled, or whose pod is leaving): what they hold counts as free.
    pub leaving: &'a BTreeSet<u32>,
    /// A pod's grace period, for the pods sunk knows.
    pub grace: &'a dyn Fn(&PodKey) -> Option<u32>,
    /// The wall clock, in UNIX seconds.
    pub now: u64,
    /// Whether slurmrestd can requeue a job (Slurm 26.05's, v0.0.45).
    pub can_requeue: bool,
    /// Whether a running job may be preempted for the waiting one.
    pub judge: &'a dyn Fn(&Job) -> Verdict,
}

/// What the policy may be offered.
#[derive(Debug)]
pub enum Offered {
    Input(ChooseVictimsInput),
    /// No running job on the usable nodes may make room; those there are protected, and why.
    Nothing {
        protected: Vec<(u32, Protection)>,
    },
}

/// The policy input for `waiting`, or what protects the running jobs in its way.
pub fn offer(waiting: &Job, name: &str, views: &Views) -> Offered {
    let partition = waiting.partition.as_str();
    let usable: Vec<&Node> = views
        .nodes
        .iter()
        .copied()
        .filter(|node| views.allowed.contains(&node.name))
        .filter(|node| partition.is_empty() || node.partitions.iter().any(|p| p == partition))
        .filter(|node| node.flags().is_responsive() && !node.flags().is_draining())
        .collect();
    let usable_names: BTreeSet<&str> = usable.iter().map(|node| node.name.as_str()).collect();

    let mut freeing: HashMap<String, Resources> = HashMap::new();
    let mut candidates = Vec::new();
    let mut protected = Vec::new();
    for job in views.holding.iter().filter(|job| job.job_id != waiting.job_id) {
        let nodes = expand_hostlist(&job.nodes).unwrap_or_default();
        if !nodes.iter().any(|node| usable_names.contains(node.as_str())) {
            continue;
        }
        if job.state() != JobState::Running || views.leaving.contains(&job.job_id) {
            for node in &nodes {
                let sum = freeing.entry(node.clone()).or_default();
                *sum = sum.plus(job.held_per_node());
            }
            continue;
        }
        match (views.judge)(job) {
            Verdict::Preemptable => candidates.push(candidate(job, nodes, views)),
            Verdict::Protected(protection) => protected.push((job.job_id, protection)),
        }
    }
    if candidates.is_empty() {
        return Offered::Nothing { protected };
    }
    let need = waiting.asked_per_node();
    let preemptor = Preemptor {
        kind: WorkloadKind::Pod,
        name: name.to_owned(),
        job_id: Some(waiting.job_id),
        priority: priority(waiting),
        partition: waiting.partition.clone(),
        node_count: u32::try_from(waiting.nodes_needed()).unwrap_or(u32::MAX),
        cpus: saturate(need.cpus),
        memory_mib: need.memory_mib,
        gpus: saturate(need.gpus),
    };
    let nodes = usable
        .iter()
        .map(|node| {
            let free = node.free().plus(freeing.get(&node.name).copied().unwrap_or_default());
            PolicyNode {
                name: node.name.clone(),
                free_cpus: saturate(free.cpus),
                free_memory_mib: free.memory_mib,
                free_gpus: saturate(free.gpus),
            }
        })
        .collect();
    Offered::Input(ChooseVictimsInput { preemptor, nodes, candidates })
}

fn candidate(job: &Job, nodes: Vec<String>, views: &Views) -> Candidate {
    let pods = linked_pods(job);
    let (kind, name) = match pods.first() {
        Some(pod) => (WorkloadKind::Pod, format!("{}/{}", pod.namespace, pod.name)),
        None => (WorkloadKind::SlurmJob, job.name.clone()),
    };
    let grace = match kind {
        // Kubernetes' default grace period for a pod sunk does not watch.
        WorkloadKind::Pod => pods.first().and_then(views.grace).unwrap_or(30),
        WorkloadKind::SlurmJob => 0,
    };
    let held = job.held_per_node();
    Candidate {
        job_id: job.job_id,
        kind,
        name,
        user: job.user_name.clone(),
        account: job.account.clone(),
        partition: job.partition.clone(),
        priority: priority(job),
        nodes,
        cpus: saturate(held.cpus),
        memory_mib: held.memory_mib,
        gpus: saturate(held.gpus),
        run_seconds: job.start_time.get().map_or(0, |start| views.now.saturating_sub(start)),
        // A pod's job goes with its pod; Slurm requeues only batch jobs that allow it.
        requeue_allowed: views.can_requeue && kind == WorkloadKind::SlurmJob && job.batch_flag && job.requeue,
        grace_seconds: grace,
    }
}

/// A job's Slurm priority (0, as a held job has, when Slurm lists none).
pub fn priority(job: &Job) -> u32 {
    job.priority.get().map_or(0, saturate)
}

fn saturate(value: u64) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::PodKey;
    use crate::slurm::NoValue;

    fn node(name: &str, alloc_cpus: u64) -> Node {
        serde_json::from_value(serde_json::json!({
            "name": name, "state": ["MIXED"], "cpus": 2, "alloc_cpus": alloc_cpus,
            "real_memory": 8192, "alloc_memory": alloc_cpus * 256, "partitions": ["batch"]
        }))
        .unwrap()
    }

    fn running(job_id: u32, node: &str, priority: u64) -> Job {
        Job {
            job_id,
            name: format!("job-{job_id}"),
            job_state: vec!["RUNNING".into()],
            nodes: node.into(),
            partition: "batch".into(),
            priority: NoValue::of(priority),
            tres_alloc_str: "cpu=2,mem=512M,node=1".into(),
            start_time: NoValue::of(1_000),
            account: "physics".into(),
            batch_flag: true,
            requeue: true,
            ..Default::default()
        }
    }

    fn waiting() -> Job {
        Job {
            job_id: 9,
            job_state: vec!["PENDING".into()],
            partition: "batch".into(),
            priority: NoValue::of(100),
            cpus: NoValue::of(2),
            memory_per_node: NoValue::of(256),
            ..Default::default()
        }
    }

    fn offered(holding: &[Job], leaving: &[u32]) -> Option<ChooseVictimsInput> {
        judged(holding, leaving, &|_| Verdict::Preemptable).ok()
    }

    fn judged(
        holding: &[Job],
        leaving: &[u32],
        judge: &dyn Fn(&Job) -> Verdict,
    ) -> Result<ChooseVictimsInput, Vec<(u32, Protection)>> {
        let (n1, n2, n3) = (node("n1", 2), node("n2", 2), node("n3", 0));
        let allowed: BTreeSet<String> = ["n1", "n2"].map(String::from).into();
        let leaving: BTreeSet<u32> = leaving.iter().copied().collect();
        let grace = |pod: &PodKey| (pod.namespace == "ml" && pod.name == "serve").then_some(15);
        let views = Views {
            nodes: vec![&n1, &n2, &n3],
            holding,
            allowed: &allowed,
            leaving: &leaving,
            grace: &grace,
            now: 1_060,
            can_requeue: true,
            judge,
        };
        match offer(&waiting(), "ml/urgent", &views) {
            Offered::Input(input) => Ok(input),
            Offered::Nothing { protected } => Err(protected),
        }
    }

    #[test]
    fn offers_the_running_jobs_on_the_nodes_the_pod_may_use() {
        let mut serve = running(2, "n2", 50);
        serve.admin_comment = PodKey { namespace: "ml".into(), name: "serve".into(), uid: "u".into() }.link().into();
        let elsewhere = running(3, "n3", 1);
        let input = offered(&[running(1, "n1", 10), serve, elsewhere, waiting()], &[]).unwrap();
        assert_eq!(input.preemptor.priority, 100);
        assert_eq!((input.preemptor.cpus, input.preemptor.memory_mib), (2, 256));
        let names: Vec<_> = input.nodes.iter().map(|n| (n.name.as_str(), n.free_cpus)).collect();
        assert_eq!(names, [("n1", 0), ("n2", 0)], "n3 is not allowed");
        let ids: Vec<_> = input.candidates.iter().map(|c| c.job_id).collect();
        assert_eq!(ids, [1, 2]);
        let pod = &input.candidates[1];
        assert_eq!((pod.kind, pod.name.as_str(), pod.grace_seconds), (WorkloadKind::Pod, "ml/serve", 15));
        let job = &input.candidates[0];
        assert_eq!((job.cpus, job.memory_mib, job.run_seconds, job.account.as_str()), (2, 512, 60, "physics"));
        assert!(job.requeue_allowed, "a batch job that may be requeued");
        let mut not_requeueable = running(1, "n1", 10);
        not_requeueable.requeue = false;
        let mut allocation = running(2, "n2", 10);
        allocation.batch_flag = false;
        let input = offered(&[not_requeueable, allocation], &[]).unwrap();
        assert!(input.candidates.iter().all(|c| !c.requeue_allowed), "{:?}", input.candidates);
        assert!(!pod.requeue_allowed, "a pod's placeholder goes with its pod");
    }

    #[test]
    fn what_a_leaving_job_holds_counts_as_free_and_it_is_no_candidate() {
        let mut completing = running(2, "n2", 50);
        completing.job_state = vec!["CANCELLED".into(), "COMPLETING".into()];
        let input = offered(&[running(1, "n1", 10), running(4, "n1", 5), completing], &[4]).unwrap();
        let free: Vec<_> = input.nodes.iter().map(|n| (n.name.as_str(), n.free_cpus)).collect();
        assert_eq!(free, [("n1", 2), ("n2", 2)]);
        assert_eq!(input.candidates.iter().map(|c| c.job_id).collect::<Vec<_>>(), [1]);
        assert!(offered(&[completing_only()], &[]).is_none(), "nothing running: nothing to offer");
    }

    #[test]
    fn a_job_slurm_s_rules_protect_is_no_candidate_and_the_offer_says_why() {
        let protect_2 = |job: &Job| match job.job_id {
            2 => Verdict::Protected(Protection::PartitionModeOff("batch".into())),
            _ => Verdict::Preemptable,
        };
        let input = judged(&[running(1, "n1", 10), running(2, "n2", 10)], &[], &protect_2).unwrap();
        assert_eq!(input.candidates.iter().map(|c| c.job_id).collect::<Vec<_>>(), [1]);
        let free: Vec<_> = input.nodes.iter().map(|n| (n.name.as_str(), n.free_cpus)).collect();
        assert_eq!(free, [("n1", 0), ("n2", 0)], "what a protected job holds is not free");
        let protected = judged(&[running(2, "n2", 10)], &[], &protect_2).unwrap_err();
        assert_eq!(protected, [(2, Protection::PartitionModeOff("batch".into()))]);
    }

    fn completing_only() -> Job {
        Job { job_state: vec!["COMPLETED".into(), "COMPLETING".into()], ..running(5, "n1", 1) }
    }
}
