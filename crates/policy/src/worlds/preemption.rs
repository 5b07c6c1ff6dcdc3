//! `preemption`: a waiting pod or job and the running jobs that could make room -> whom to preempt.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use wasmtime::Store;
use wasmtime::component::InstancePre;

use crate::bindings::preemption::PreemptionPre;
use crate::bindings::preemption_types::{Candidate, Node, PreemptMode, PreemptionDecision, Preemptor, WorkloadKind};
use crate::bundled;
use crate::engine::StoreState;
use crate::world::{World, check_text_size};

/// The `preemption` world.
pub enum PreemptionWorld {}

/// The arguments of `choose-victims`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChooseVictimsInput {
    pub preemptor: Preemptor,
    pub nodes: Vec<Node>,
    pub candidates: Vec<Candidate>,
}

impl World for PreemptionWorld {
    const NAME: &'static str = "preemption";
    const EXPORT: &'static str = "choose-victims";
    type Input = ChooseVictimsInput;
    type Output = PreemptionDecision;
    type Pre = PreemptionPre<StoreState>;

    fn bundled() -> &'static [u8] {
        bundled::PREEMPTION
    }

    fn pre(instance: InstancePre<StoreState>) -> wasmtime::Result<Self::Pre> {
        PreemptionPre::new(instance)
    }

    fn call(pre: &Self::Pre, store: &mut Store<StoreState>, input: &Self::Input) -> wasmtime::Result<Self::Output> {
        pre.instantiate(&mut *store)?.call_choose_victims(store, &input.preemptor, &input.nodes, &input.candidates)
    }

    /// Victims must be distinct candidates below the preemptor's priority (a policy cannot name a job
    /// the host did not offer, nor one that outranks the waiting work), made to go in a way the host
    /// can carry out: only a candidate offered with `requeue-allowed` can be requeued.
    fn check(input: &ChooseVictimsInput, output: &PreemptionDecision) -> Result<(), String> {
        let mut chosen = HashSet::new();
        for victim in &output.victims {
            let Some(candidate) = input.candidates.iter().find(|c| c.job_id == victim.job_id) else {
                return Err(format!("victim job {} that is not among the candidates", victim.job_id));
            };
            if !chosen.insert(victim.job_id) {
                return Err(format!("victim job {} twice", victim.job_id));
            }
            if candidate.priority >= input.preemptor.priority {
                return Err(format!(
                    "victim job {} of priority {}, not below the preemptor's {}",
                    victim.job_id, candidate.priority, input.preemptor.priority
                ));
            }
            match (candidate.kind, victim.mode) {
                (WorkloadKind::Pod, PreemptMode::Cancel | PreemptMode::Requeue) => {
                    return Err(format!(
                        "victim job {} is pod {}'s: evict it (cancelling its job would bypass its \
                         PodDisruptionBudget)",
                        victim.job_id, candidate.name
                    ));
                }
                (WorkloadKind::SlurmJob, PreemptMode::Evict) => {
                    return Err(format!("victim job {} is a Slurm job: cancel or requeue it", victim.job_id));
                }
                (WorkloadKind::Pod, PreemptMode::Evict) if victim.grace_seconds > candidate.grace_seconds => {
                    return Err(format!(
                        "victim pod {} evicted with {} s of grace, more than its own {} s",
                        candidate.name, victim.grace_seconds, candidate.grace_seconds
                    ));
                }
                _ => {}
            }
            if victim.mode == PreemptMode::Requeue && !candidate.requeue_allowed {
                return Err(format!(
                    "victim job {}: requeue, which it was not offered with (a pod's job, a job that is no \
                     batch job or may not be requeued, or a slurmrestd older than Slurm 26.05's); cancel \
                     it, or evict a pod",
                    victim.job_id
                ));
            }
        }
        check_text_size([output.reason.as_str()])
    }

    fn is_rejection(output: &PreemptionDecision) -> bool {
        output.victims.is_empty()
    }

    fn samples() -> Vec<ChooseVictimsInput> {
        let preemptor = Preemptor {
            kind: WorkloadKind::Pod,
            name: "default/sample-urgent".into(),
            job_id: None,
            priority: 1000,
            partition: "gpu".into(),
            node_count: 1,
            cpus: 8,
            memory_mib: 16 << 10,
            gpus: 4,
        };
        let node = Node { name: "gpu-1".into(), free_cpus: 0, free_memory_mib: 0, free_gpus: 0 };
        let candidate = |job_id, priority, kind| Candidate {
            job_id,
            kind,
            name: format!("sample-{job_id}"),
            user: "alice".into(),
            account: "research".into(),
            partition: "gpu".into(),
            priority,
            nodes: vec!["gpu-1".into()],
            cpus: 8,
            memory_mib: 16 << 10,
            gpus: 4,
            run_seconds: 600,
            requeue_allowed: true,
            grace_seconds: 30,
        };
        let crowded = ChooseVictimsInput {
            preemptor: preemptor.clone(),
            nodes: vec![node.clone()],
            candidates: vec![candidate(11, 10, WorkloadKind::SlurmJob), candidate(12, 5000, WorkloadKind::Pod)],
        };
        let nobody_below = ChooseVictimsInput {
            preemptor,
            nodes: vec![node],
            candidates: vec![candidate(13, 5000, WorkloadKind::SlurmJob)],
        };
        vec![crowded, nobody_below]
    }

    fn summarize_input(input: &ChooseVictimsInput) -> String {
        let p = &input.preemptor;
        format!(
            "{} priority={} needs {}x(cpus={} memory={}Mi gpus={}) nodes={} candidates={}",
            p.name,
            p.priority,
            p.node_count,
            p.cpus,
            p.memory_mib,
            p.gpus,
            input.nodes.len(),
            input.candidates.len()
        )
    }

    fn summarize_output(output: &PreemptionDecision) -> String {
        let victims: Vec<String> =
            output.victims.iter().map(|v| format!("{}:{:?}", v.job_id, v.mode).to_lowercase()).collect();
        format!("victims=[{}] reason={}", victims.join(","), output.reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::preemption_types::Victim;

    fn decision(victims: &[(u32, PreemptMode)]) -> PreemptionDecision {
        PreemptionDecision {
            victims: victims.iter().map(|&(job_id, mode)| Victim { job_id, mode, grace_seconds: 0 }).collect(),
            reason: "sample".into(),
        }
    }

    /// An input, the victims a decision names, and words of the refusal (None: accepted).
    type CheckCase<'a> = (&'a ChooseVictimsInput, &'a [(u32, PreemptMode)], Option<&'a str>);

    #[test]
    fn victims_must_be_offered_below_the_preemptor_and_requeued_only_where_allowed() {
        // Candidates 11 (priority 10, may be requeued) and 12 (5000); the preemptor ranks 1000.
        let input = &PreemptionWorld::samples()[0];
        let mut not_requeueable = input.clone();
        not_requeueable.candidates[0].requeue_allowed = false;
        let cases: &[CheckCase] = &[
            (input, &[(11, PreemptMode::Cancel)], None),
            (input, &[(11, PreemptMode::Requeue)], None),
            (&not_requeueable, &[(11, PreemptMode::Requeue)], Some("victim job 11: requeue, which it was not offered")),
            (input, &[(99, PreemptMode::Cancel)], Some("not among the candidates")),
            (input, &[(11, PreemptMode::Cancel), (11, PreemptMode::Cancel)], Some("twice")),
            (input, &[(12, PreemptMode::Evict)], Some("not below the preemptor's 1000")),
        ];
        for (input, victims, refusal) in cases {
            let checked = PreemptionWorld::check(input, &decision(victims));
            match refusal {
                None => assert_eq!(checked, Ok(()), "{victims:?}"),
                Some(words) => {
                    assert!(checked.as_ref().is_err_and(|why| why.contains(words)), "{victims:?}: {checked:?}")
                }
            }
        }
    }

    #[test]
    fn a_pod_is_only_evicted_and_never_with_more_grace_than_its_own() {
        // Candidate 12 is a pod with 30 s of grace; here it ranks below the preemptor.
        let mut input = PreemptionWorld::samples()[0].clone();
        input.candidates[1].priority = 10;
        let one = |job_id, mode, grace_seconds| PreemptionDecision {
            victims: vec![Victim { job_id, mode, grace_seconds }],
            reason: "sample".into(),
        };
        assert_eq!(PreemptionWorld::check(&input, &one(12, PreemptMode::Evict, 30)), Ok(()));
        let refused = [
            (one(12, PreemptMode::Cancel, 0), "evict it"),
            (one(12, PreemptMode::Requeue, 0), "evict it"),
            (one(12, PreemptMode::Evict, 31), "more than its own 30 s"),
            (one(11, PreemptMode::Evict, 0), "is a Slurm job"),
        ];
        for (decision, words) in refused {
            let checked = PreemptionWorld::check(&input, &decision);
            assert!(checked.as_ref().is_err_and(|why| why.contains(words)), "{decision:?}: {checked:?}");
        }
    }
}
