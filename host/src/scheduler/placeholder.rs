//! The placeholder job that holds a pod's place in Slurm, and how a job names its pod.
//!
//! The link lives in `admin_comment` (only Slurm administrators can change it), so the host can
//! re-associate pods and jobs after any restart without keeping state of its own.

use crate::policy::{Exclusive as PolicyExclusive, JobRequest};
use crate::slurm::{ApiVersion, Exclusive, JobDescription, JobFlag, NoValue};

const LINK_PREFIX: &str = "sunk.dev/pod=";
/// Appended to the link of a job the host cancelled to submit a better placed one: when it has
/// ended, the pod is not deleted but gets a new job.
const REPLACED_MARK: &str = ";replaced";
/// Appended to the link of an immediate allocation: Slurm keeps a refused one as a FAILED job that
/// never held a node, which must not count as the pod's job having failed.
const ATTEMPT_MARK: &str = ";immediate";
/// Placeholders sleep until cancelled: the pod, not the job, does the work.
const SCRIPT: &str = "#!/bin/sh\n# sunk placeholder: holds this allocation for a Kubernetes pod\nexec sleep infinity\n";

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

/// The pod a placeholder job stands for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodKey {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl PodKey {
    /// The `admin_comment` that ties a job to this pod.
    pub fn link(&self) -> String {
        format!("{LINK_PREFIX}{}/{}/{}", self.namespace, self.name, self.uid)
    }

    /// The pod a job's `admin_comment` names, if the job is one of sunk's placeholders.
    pub fn from_link(admin_comment: &str) -> Option<Self> {
        let rest = admin_comment.strip_prefix(LINK_PREFIX)?;
        let rest = rest.split_once(';').map_or(rest, |(link, _mark)| link);
        let mut parts = rest.splitn(3, '/');
        let (namespace, name, uid) = (parts.next()?, parts.next()?, parts.next()?);
        [namespace, name, uid].iter().all(|part| !part.is_empty()).then(|| Self {
            namespace: namespace.into(),
            name: name.into(),
            uid: uid.into(),
        })
    }
}

/// The pods a job stands for: its one pod, every member of its gang, or the pods of the array tasks
/// it is.
pub fn linked_pods(job: &crate::slurm::Job) -> Vec<PodKey> {
    linked(job).into_iter().map(|(pod, _)| pod).collect()
}

/// Each pod a job stands for, with what is that pod's job: the job itself, or for tasks of an array
/// still pending together, the pod's own task.
pub fn linked(job: &crate::slurm::Job) -> Vec<(PodKey, crate::slurm::Job)> {
    if let Some(pod) = PodKey::from_link(&job.admin_comment) {
        return vec![(pod, job.clone())];
    }
    if let Some(gang) = super::gang::GangLink::parse(&job.admin_comment) {
        return gang.members.into_iter().map(|pod| (pod, job.clone())).collect();
    }
    super::batch::ArrayLink::parse(&job.admin_comment).map(|array| array.placeholders(job)).unwrap_or_default()
}

/// `<pod>:<uid>,<pod>:<uid>...`: several pods of one namespace in a link.
pub(super) fn render_members(members: &[PodKey]) -> String {
    let members: Vec<String> = members.iter().map(|pod| format!("{}:{}", pod.name, pod.uid)).collect();
    members.join(",")
}

/// The pods of a [`render_members`] list in `namespace`; none if any is malformed or there are none.
pub(super) fn parse_members(namespace: &str, members: &str) -> Option<Vec<PodKey>> {
    let members: Option<Vec<PodKey>> = members
        .split(',')
        .map(|member| {
            let (name, uid) = member.split_once(':')?;
            (!name.is_empty() && !uid.is_empty()).then(|| PodKey {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                uid: uid.to_owned(),
            })
        })
        .collect();
    members.filter(|members| !members.is_empty())
}

/// Whether the host cancelled this job to replace it with another for the same pod.
pub fn is_replaced(job: &crate::slurm::Job) -> bool {
    job.admin_comment.ends_with(REPLACED_MARK)
}

/// The `admin_comment` of an immediate allocation attempt.
pub fn attempt(admin_comment: &str) -> String {
    format!("{admin_comment}{ATTEMPT_MARK}")
}

/// Whether a job is an immediate allocation Slurm refused (it ended without ever holding a node).
pub fn is_refused_attempt(job: &crate::slurm::Job) -> bool {
    job.admin_comment.contains(ATTEMPT_MARK) && job.nodes.is_empty() && job.state() == crate::slurm::JobState::Ended
}

/// The `admin_comment` that marks a job as replaced (see [`is_replaced`]).
pub fn replaced(admin_comment: &str) -> String {
    if admin_comment.ends_with(REPLACED_MARK) {
        admin_comment.to_owned()
    } else {
        format!("{admin_comment}{REPLACED_MARK}")
    }
}

/// The Slurm submission for a pod, from what the job-mapper policy asked for.
pub fn job_description(pod: &PodKey, request: JobRequest, kind: PlaceholderKind) -> JobDescription {
    let (script, flags) = match kind {
        PlaceholderKind::Batch => (SCRIPT.into(), Vec::new()),
        PlaceholderKind::External => (String::new(), vec![JobFlag::External]),
    };
    JobDescription {
        name: format!("{}/{}", pod.namespace, pod.name),
        script,
        flags,
        immediate: None,
        current_working_directory: request.current_working_directory.unwrap_or_else(|| "/tmp".into()),
        environment: vec!["PATH=/usr/local/bin:/usr/bin:/bin".into()],
        admin_comment: Some(pod.link()),
        comment: request.comment,
        partition: request.partition,
        account: request.account,
        qos: request.qos,
        reservation: request.reservation,
        constraints: request.constraints,
        prefer: request.prefer,
        excluded_nodes: request.excluded_nodes,
        required_nodes: request.required_nodes,
        exclusive: request.exclusive.and_then(|mode| match mode {
            PolicyExclusive::None => None,
            PolicyExclusive::Ok => Some(Exclusive::None),
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
        array: None,
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
        let external = job_description(&pod, request(), PlaceholderKind::External);
        assert!(external.script.is_empty(), "Slurm refuses an external job with a script");
        assert_eq!(external.flags, [JobFlag::External]);
        let batch = job_description(&pod, request(), PlaceholderKind::Batch);
        assert!(batch.script.starts_with("#!/bin/sh") && batch.flags.is_empty());
    }

    #[test]
    fn a_link_names_its_pod_and_nothing_else_does() {
        let key = PodKey { namespace: "ml".into(), name: "train-0".into(), uid: "1234-abcd".into() };
        assert_eq!(PodKey::from_link(&key.link()), Some(key.clone()));
        assert_eq!(PodKey::from_link("set by an admin"), None);
        assert_eq!(PodKey::from_link("sunk.dev/pod=ns//uid"), None);
        let replaced = crate::slurm::Job { admin_comment: super::replaced(&key.link()), ..Default::default() };
        assert_eq!(PodKey::from_link(&replaced.admin_comment), Some(key.clone()));
        assert!(is_replaced(&replaced));
        assert_eq!(super::replaced(&replaced.admin_comment), replaced.admin_comment);
        let refused = crate::slurm::Job {
            admin_comment: attempt(&key.link()),
            job_state: vec!["FAILED".into()],
            ..Default::default()
        };
        assert!(is_refused_attempt(&refused));
        assert_eq!(PodKey::from_link(&refused.admin_comment), Some(key.clone()));
        let granted = crate::slurm::Job { nodes: "n1".into(), ..refused };
        assert!(!is_refused_attempt(&granted), "an allocation that ran ends its pod as any job does");
        assert!(!is_replaced(&crate::slurm::Job { admin_comment: key.link(), ..Default::default() }));
    }
}
