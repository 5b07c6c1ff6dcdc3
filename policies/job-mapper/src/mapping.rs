//! The bundled mapping from a pod to its placeholder Slurm job.

use crate::affinity;
use crate::annotations;
use crate::sunk::policy::job_types::{Cluster, JobRequest, Mapping, Pod, Rejection};

const MIB: u64 = 1 << 20;

/// Seconds Slurm's KillWait must exceed the pod's grace period by, so the pod is stopped gracefully
/// before Slurm kills the placeholder job.
const GRACE_MARGIN_SECONDS: u64 = 5;

const CPU_FIELD: &str = "spec.containers[*].resources.requests.cpu";
const MEMORY_FIELD: &str = "spec.containers[*].resources.requests.memory";
const GRACE_FIELD: &str = "spec.terminationGracePeriodSeconds";

pub fn map_pod(pod: &Pod, cluster: &Cluster) -> Mapping {
    match job_request(pod, cluster) {
        Ok(job) => Mapping::Job(job),
        Err(rejection) => Mapping::Reject(rejection),
    }
}

fn job_request(pod: &Pod, cluster: &Cluster) -> Result<JobRequest, Rejection> {
    let cpus = cpus(pod.cpu_request_millis)?;
    let memory_mib = memory_mib(pod.memory_request_bytes)?;
    check_grace_period(pod.termination_grace_seconds, cluster.kill_wait_seconds)?;
    let table = annotations::parse(&pod.annotations, &cluster.partitions)?;
    let constraints = match (table.constraints, affinity::gpu_constraint(pod)?) {
        (Some(asked), Some(gpu)) => Some(affinity::conjoin(&asked, &gpu)),
        (asked, gpu) => asked.or(gpu),
    };
    Ok(JobRequest {
        partition: table.partition,
        account: table.account.or_else(|| cluster.default_account.clone()),
        qos: table.qos,
        reservation: table.reservation,
        comment: table.comment,
        constraints,
        prefer: table.prefer,
        exclusive: table.exclusive,
        excluded_nodes: table.excluded_nodes,
        required_nodes: table.required_nodes,
        // The annotation wins; otherwise the PriorityClass ranks the pod against Slurm's own jobs.
        priority: table.priority.or_else(|| pod.priority.and_then(class_priority)),
        user_id: table.user_id,
        group_id: table.group_id,
        current_working_directory: table.current_working_dir,
        time_limit_minutes: table.timeout_minutes,
        cpus,
        memory_mib,
        tres_per_node: (pod.gpus > 0).then(|| format!("gres/gpu:{}", pod.gpus)),
    })
}

/// A PriorityClass's value as a Slurm priority: only positive ones (a pod without a class, or of a
/// negative one, keeps the priority Slurm computes; Slurm reads 0 as "held").
fn class_priority(value: i32) -> Option<u32> {
    u32::try_from(value).ok().filter(|priority| *priority > 0)
}

/// Whole CPUs for the placeholder: the request rounded up.
fn cpus(millis: u64) -> Result<u32, Rejection> {
    if millis == 0 {
        return Err(Rejection {
            field: CPU_FIELD.to_owned(),
            message: "the pod requests no CPU; set resources.requests.cpu on its containers \
                      (for example \"500m\" or \"2\") so Slurm can reserve it"
                .to_owned(),
        });
    }
    u32::try_from(millis.div_ceil(1000)).map_err(|_| Rejection {
        field: CPU_FIELD.to_owned(),
        message: format!("the pod requests {millis}m CPU, more than Slurm can allocate"),
    })
}

/// Memory for the placeholder in MiB: the request rounded up.
fn memory_mib(bytes: u64) -> Result<u64, Rejection> {
    if bytes == 0 {
        return Err(Rejection {
            field: MEMORY_FIELD.to_owned(),
            message: "the pod requests no memory; set resources.requests.memory on its containers \
                      (for example \"512Mi\" or \"4Gi\") so Slurm can reserve it"
                .to_owned(),
        });
    }
    Ok(bytes.div_ceil(MIB))
}

/// The pod must stop within Slurm's KillWait (less a margin), or Slurm kills it mid-shutdown.
fn check_grace_period(grace_seconds: u64, kill_wait_seconds: u32) -> Result<(), Rejection> {
    let kill_wait = u64::from(kill_wait_seconds);
    if grace_seconds.saturating_add(GRACE_MARGIN_SECONDS) < kill_wait {
        return Ok(());
    }
    let limit = kill_wait.saturating_sub(GRACE_MARGIN_SECONDS + 1);
    let advice = if kill_wait > GRACE_MARGIN_SECONDS {
        format!("set spec.terminationGracePeriodSeconds to {limit} or less")
    } else {
        "no grace period fits; ask the cluster operator to raise KillWait".to_owned()
    };
    Err(Rejection {
        field: GRACE_FIELD.to_owned(),
        message: format!(
            "terminationGracePeriodSeconds is {grace_seconds}s, but it must be less than Slurm's \
             KillWait ({kill_wait}s) minus {GRACE_MARGIN_SECONDS}s: {advice}"
        ),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::sunk::policy::job_types::{Exclusive, KeyValue, NodeSelectorRequirement, SelectorOperator};

    /// A pod with 1.5 CPUs, 1 GiB + 1 byte, no GPUs, no annotations.
    pub(crate) fn pod() -> Pod {
        Pod {
            namespace: "ml".into(),
            name: "train-0".into(),
            uid: "3f1c".into(),
            labels: vec![],
            annotations: vec![],
            cpu_request_millis: 1500,
            memory_request_bytes: (1 << 30) + 1,
            cpu_limit_millis: 0,
            memory_limit_bytes: 0,
            gpus: 0,
            node_selector: vec![],
            required_node_affinity: vec![],
            tolerations: vec![],
            priority: None,
            termination_grace_seconds: 30,
        }
    }

    fn cluster() -> Cluster {
        Cluster {
            partitions: vec!["batch".into(), "gpu".into()],
            default_partition: Some("batch".into()),
            default_account: Some("root".into()),
            kill_wait_seconds: 60,
        }
    }

    fn job(pod: &Pod, cluster: &Cluster) -> JobRequest {
        match map_pod(pod, cluster) {
            Mapping::Job(job) => job,
            Mapping::Reject(r) => panic!("rejected: {}: {}", r.field, r.message),
        }
    }

    fn rejection(pod: &Pod, cluster: &Cluster) -> Rejection {
        match map_pod(pod, cluster) {
            Mapping::Job(job) => panic!("mapped: {job:?}"),
            Mapping::Reject(r) => r,
        }
    }

    #[test]
    fn resources_round_up() {
        let j = job(&pod(), &cluster());
        assert_eq!((j.cpus, j.memory_mib, j.tres_per_node), (2, 1025, None));
        let p = Pod { cpu_request_millis: 1, memory_request_bytes: 1, gpus: 4, ..pod() };
        let j = job(&p, &cluster());
        assert_eq!((j.cpus, j.memory_mib), (1, 1));
        assert_eq!(j.tres_per_node.as_deref(), Some("gres/gpu:4"));
        let p = Pod { cpu_request_millis: 8000, memory_request_bytes: 4 << 30, ..pod() };
        let j = job(&p, &cluster());
        assert_eq!((j.cpus, j.memory_mib), (8, 4096));
    }

    #[test]
    fn a_positive_priority_class_becomes_the_jobs_priority_unless_annotated() {
        let ranked = |priority: Option<i32>| job(&Pod { priority, ..pod() }, &cluster()).priority;
        assert_eq!(ranked(Some(1000)), Some(1000));
        assert_eq!(ranked(Some(0)), None, "no class: Slurm's own priority");
        assert_eq!(ranked(Some(-5)), None);
        assert_eq!(ranked(None), None);
        let annotated = Pod {
            priority: Some(1000),
            annotations: vec![KeyValue { key: "sunk.dev/priority".into(), value: "7".into() }],
            ..pod()
        };
        assert_eq!(job(&annotated, &cluster()).priority, Some(7));
    }

    #[test]
    fn defaults_leave_slurm_in_charge() {
        let j = job(&pod(), &cluster());
        assert_eq!(j.account.as_deref(), Some("root"));
        assert_eq!(j.partition, None);
        assert_eq!(j.constraints, None);
        assert_eq!(j.exclusive, None);
        assert!(j.excluded_nodes.is_empty() && j.required_nodes.is_empty());
        let no_default = Cluster { default_account: None, ..cluster() };
        assert_eq!(job(&pod(), &no_default).account, None);
    }

    #[test]
    fn missing_requests_reject_with_the_field() {
        let p = Pod { cpu_request_millis: 0, ..pod() };
        let r = rejection(&p, &cluster());
        assert_eq!(r.field, CPU_FIELD);
        assert!(r.message.contains("requests.cpu"), "{}", r.message);
        let p = Pod { memory_request_bytes: 0, ..pod() };
        assert_eq!(rejection(&p, &cluster()).field, MEMORY_FIELD);
    }

    #[test]
    fn grace_period_must_fit_kill_wait() {
        let c = cluster();
        let ok = Pod { termination_grace_seconds: 54, ..pod() };
        job(&ok, &c);
        let too_long = Pod { termination_grace_seconds: 55, ..pod() };
        let r = rejection(&too_long, &c);
        assert_eq!(r.field, GRACE_FIELD);
        assert!(r.message.contains("54 or less"), "{}", r.message);
        let tiny = Cluster { kill_wait_seconds: 5, ..c };
        let zero = Pod { termination_grace_seconds: 0, ..pod() };
        assert!(rejection(&zero, &tiny).message.contains("raise KillWait"));
        let huge = Pod { termination_grace_seconds: u64::MAX, ..pod() };
        assert_eq!(rejection(&huge, &cluster()).field, GRACE_FIELD);
    }

    #[test]
    fn annotations_set_options() {
        let p = Pod {
            annotations: vec![
                KeyValue { key: "sunk.dev/partition".into(), value: "gpu".into() },
                KeyValue { key: "sunk.coreweave.com/account".into(), value: "physics".into() },
                KeyValue { key: "sunk.dev/exclusive".into(), value: "true".into() },
                KeyValue { key: "sunk.dev/timeout".into(), value: "120".into() },
            ],
            ..pod()
        };
        let j = job(&p, &cluster());
        assert_eq!(j.partition.as_deref(), Some("gpu"));
        assert_eq!(j.account.as_deref(), Some("physics"));
        assert_eq!(j.exclusive, Some(Exclusive::None), "true is a whole node");
        assert_eq!(j.time_limit_minutes, Some(120));
    }

    #[test]
    fn malformed_annotation_rejects() {
        let p = Pod { annotations: vec![KeyValue { key: "sunk.dev/partition".into(), value: "nope".into() }], ..pod() };
        let r = rejection(&p, &cluster());
        assert_eq!(r.field, "sunk.dev/partition");
        assert!(r.message.contains("\"nope\""), "{}", r.message);
    }

    #[test]
    fn gpu_affinity_and_constraints_annotation_combine() {
        let mut p = Pod {
            required_node_affinity: vec![vec![NodeSelectorRequirement {
                key: "nvidia.com/gpu.product".into(),
                operator: SelectorOperator::In,
                values: vec!["H100".into(), "A100".into()],
            }]],
            ..pod()
        };
        assert_eq!(job(&p, &cluster()).constraints.as_deref(), Some("H100|A100"));
        p.annotations.push(KeyValue { key: "sunk.dev/constraints".into(), value: "ib".into() });
        assert_eq!(job(&p, &cluster()).constraints.as_deref(), Some("ib&(H100|A100)"));
        p.required_node_affinity.clear();
        assert_eq!(job(&p, &cluster()).constraints.as_deref(), Some("ib"));
    }
}
