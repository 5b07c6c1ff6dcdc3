//! The placeholder job that holds a pod's place in Slurm: the job as last seen ([`Placeholder`]),
//! what it is made of (a batch job that sleeps, or a job that launches nothing) and what it asks
//! Slurm for. How it names its pod is
//! [`super::link`].

use super::link::{Installation, PodKey};
use crate::policy::{Exclusive as PolicyExclusive, JobRequest};
use crate::slurm::{ApiVersion, Exclusive, Job, JobDescription, JobFlag, NoValue};

/// A placeholder job as last seen.
#[derive(Debug, Clone, PartialEq)]
pub struct Placeholder {
    pub pod: PodKey,
    pub job: Job,
}

/// Placeholders and hold jobs sleep until cancelled: pods, not the job, do the work.
const SCRIPT: &str = "#!/bin/sh\n# sunk: holds this allocation for Kubernetes pods\nexec sleep infinity\n";

const DISCARD: &str = "/dev/null";

/// Which placeholders the operator has the host submit.
///
/// Batch jobs are the default because they are faster where it counts: a burst of pods goes to Slurm
/// as a few job arrays, and Slurm has no arrays of external jobs, so a burst of those costs slurmctld
/// one submission per pod (500 pods on 26.05.5: 11 pods/s against 36 pods/s as arrays, see
/// docs/benchmarks.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Placeholders {
    /// Batch jobs whose script sleeps until cancelled.
    #[default]
    Batch,
    /// Jobs that launch nothing on their node where the Slurm has them (26.05: data parser v0.0.43
    /// and later), batch jobs elsewhere. No Prolog or Epilog runs for them, and a job that Slurm's
    /// own preemption starts in one's place waits for the next backfill pass.
    External,
}

/// What a placeholder job is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlaceholderKind {
    /// A batch job whose script sleeps until cancelled: slurmd starts a slurmstepd for it on its
    /// node, and pods arriving together go as one job array.
    Batch,
    /// A job without a script (`EXTERNAL_JOB`): Slurm schedules and accounts for it, and nothing
    /// starts on the node. It cannot be an array task, so every pod's is submitted on its own.
    External,
}

impl Placeholders {
    /// The kind to submit to a slurmrestd speaking `api`.
    pub fn kind(self, api: ApiVersion) -> PlaceholderKind {
        match self {
            Placeholders::External if api.has_external_jobs() => PlaceholderKind::External,
            Placeholders::External | Placeholders::Batch => PlaceholderKind::Batch,
        }
    }
}

/// The Slurm submission for a pod, from what the job-mapper policy asked for, linked to the pod as
/// `installation`'s.
pub fn job_description(
    pod: &PodKey,
    request: JobRequest,
    kind: PlaceholderKind,
    installation: &Installation,
) -> JobDescription {
    JobDescription {
        current_working_directory: request.current_working_directory.unwrap_or_else(|| "/tmp".into()),
        comment: request.comment,
        partition: request.partition,
        account: request.account,
        qos: request.qos,
        reservation: request.reservation,
        constraints: request.constraints,
        prefer: request.prefer,
        excluded_nodes: request.excluded_nodes,
        required_nodes: request.required_nodes,
        // `ok` leaves Slurm's default, sharing the node's free resources: never `--oversubscribe`,
        // whose jobs share CPUs the kubelet would refuse to give twice.
        exclusive: request.exclusive.and_then(|mode| match mode {
            PolicyExclusive::None => Some(Exclusive::None),
            PolicyExclusive::Ok => None,
            PolicyExclusive::User => Some(Exclusive::User),
            PolicyExclusive::Mcs => Some(Exclusive::Mcs),
            PolicyExclusive::Topo => Some(Exclusive::Topo),
        }),
        priority: request.priority.map(|priority| NoValue::of(priority.into())),
        user_id: request.user_id.map(|id| id.to_string()),
        group_id: request.group_id.map(|id| id.to_string()),
        time_limit: request.time_limit_minutes.map(|minutes| NoValue::of(minutes.into())),
        cpus_per_task: request.cpus.max(1),
        minimum_nodes: None,
        maximum_nodes: None,
        tasks: None,
        tasks_per_node: None,
        memory_per_node: NoValue::of(request.memory_mib.max(1)),
        tres_per_node: request.tres_per_node,
        ..holder(kind, format!("{}/{}", pod.namespace, pod.name), installation.sign(pod.link()))
    }
}

/// A job that holds what Slurm gives it and does nothing with it, as `kind` makes it: a placeholder,
/// or a hold job (`pool::holds`). Its size and place are the caller's.
pub fn holder(kind: PlaceholderKind, name: String, admin_comment: String) -> JobDescription {
    let (script, flags) = match kind {
        PlaceholderKind::Batch => (SCRIPT.into(), Vec::new()),
        PlaceholderKind::External => (String::new(), vec![JobFlag::External]),
    };
    JobDescription {
        name,
        script,
        flags,
        current_working_directory: "/tmp".into(),
        environment: vec!["PATH=/usr/local/bin:/usr/bin:/bin".into()],
        // It prints nothing worth keeping, and a file in its working directory would be written as
        // whoever it runs as.
        standard_output: Some(DISCARD.into()),
        standard_error: Some(DISCARD.into()),
        admin_comment: Some(admin_comment),
        cpus_per_task: 1,
        memory_per_node: NoValue::of(1),
        ..JobDescription::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_launch_nothing_where_slurm_can_do_that() {
        let cases = [
            (Placeholders::External, ApiVersion::V0_0_42, PlaceholderKind::Batch),
            (Placeholders::External, ApiVersion::V0_0_43, PlaceholderKind::External),
            (Placeholders::External, ApiVersion::V0_0_44, PlaceholderKind::External),
            (Placeholders::Batch, ApiVersion::V0_0_44, PlaceholderKind::Batch),
        ];
        for (mode, api, kind) in cases {
            assert_eq!(mode.kind(api), kind, "{mode:?} on {api}");
        }
        let pod = PodKey { namespace: "ml".into(), name: "train-0".into(), uid: "1234".into() };
        let request = || -> JobRequest {
            let fields = serde_json::json!({"cpus": 1, "memory_mib": 64, "excluded_nodes": [], "required_nodes": []});
            serde_json::from_value(fields).expect("a job request")
        };
        let installation = Installation::new("sunk", "cluster");
        let external = job_description(&pod, request(), PlaceholderKind::External, &installation);
        assert!(external.script.is_empty(), "Slurm refuses an external job with a script");
        assert_eq!(external.flags, [JobFlag::External]);
        let batch = job_description(&pod, request(), PlaceholderKind::Batch, &installation);
        assert_eq!(batch.admin_comment.as_deref(), Some("sunk.dev/pod=ml/train-0/1234;by=sunk@cluster"));
        assert!(batch.script.starts_with("#!/bin/sh") && batch.flags.is_empty());
        assert_eq!((batch.standard_output.as_deref(), batch.standard_error.as_deref()), (Some(DISCARD), Some(DISCARD)));
    }
}
