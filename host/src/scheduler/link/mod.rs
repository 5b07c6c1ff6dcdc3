//! How a Slurm job names the pods it stands for, in its `admin_comment` (only Slurm administrators
//! can change it), so the host re-associates pods and jobs after any restart without state of its
//! own: one pod (`sunk.dev/pod=`), a gang's members ([`GangLink`]) or an array's tasks
//! ([`ArrayLink`]), the node a hold job holds for pods outside Slurm ([`hold_link`]), and the marks
//! appended to a link. A leaf: it knows jobs and pods by name only.

mod array;
mod gang;
mod hold;
mod installation;
#[cfg(test)]
mod properties;
mod seal;

pub use array::ArrayLink;
pub use gang::GangLink;
pub use hold::{held_node, hold_link};
pub use installation::Installation;
pub use seal::{Seal, carried};

use crate::vocabulary::{ATTEMPT_MARK, POD_LINK, REPLACED_MARK};

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
        format!("{POD_LINK}{}/{}/{}", self.namespace, self.name, self.uid)
    }

    /// The pod a job's `admin_comment` names, if the job is one of sunk's placeholders.
    pub fn from_link(admin_comment: &str) -> Option<Self> {
        let rest = admin_comment.strip_prefix(POD_LINK)?;
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
    if let Some(gang) = GangLink::parse(&job.admin_comment) {
        return gang.members.into_iter().map(|pod| (pod, job.clone())).collect();
    }
    ArrayLink::parse(&job.admin_comment).map(|array| array.placeholders(job)).unwrap_or_default()
}

/// Whether the job is a gang's (one job for every member of a pod group).
pub fn is_gang(job: &crate::slurm::Job) -> bool {
    GangLink::parse(&job.admin_comment).is_some()
}

/// `<pod>:<uid>,<pod>:<uid>...`: several pods of one namespace in a link.
fn render_members(members: &[PodKey]) -> String {
    let members: Vec<String> = members.iter().map(|pod| format!("{}:{}", pod.name, pod.uid)).collect();
    members.join(",")
}

/// The pods of a [`render_members`] list in `namespace`; none if any is malformed or there are none.
fn parse_members(namespace: &str, members: &str) -> Option<Vec<PodKey>> {
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

/// Whether a job is an immediate allocation that came to nothing, which never ends its pod: one
/// Slurm refused (it ended without ever holding a node), or one slurmctld granted and then killed
/// because it could not deliver the answer (`Job allocate response msg send failure`, as when
/// slurmrestd restarts mid-call): it ends FAILED, and an allocation runs nothing that could fail.
pub fn is_failed_attempt(job: &crate::slurm::Job) -> bool {
    let refused = job.nodes.is_empty();
    let killed = job.job_state.iter().any(|state| state == "FAILED");
    job.admin_comment.contains(ATTEMPT_MARK) && job.state() == crate::slurm::JobState::Ended && (refused || killed)
}

/// The `admin_comment` that marks a job as replaced (see [`is_replaced`]).
pub fn replaced(admin_comment: &str) -> String {
    if admin_comment.ends_with(REPLACED_MARK) {
        admin_comment.to_owned()
    } else {
        format!("{admin_comment}{REPLACED_MARK}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_names_its_pod_and_nothing_else_does() {
        let key = PodKey { namespace: "ml".into(), name: "train-0".into(), uid: "1234-abcd".into() };
        assert_eq!(PodKey::from_link(&key.link()), Some(key.clone()));
        assert_eq!(PodKey::from_link("set by an admin"), None);
        assert_eq!(PodKey::from_link("sunk.dev/pod=ns//uid"), None);
        let replaced = crate::slurm::Job { admin_comment: super::replaced(&key.link()).into(), ..Default::default() };
        assert_eq!(PodKey::from_link(&replaced.admin_comment), Some(key.clone()));
        assert!(is_replaced(&replaced));
        assert_eq!(replaced.admin_comment, super::replaced(&replaced.admin_comment));
        let refused = crate::slurm::Job {
            admin_comment: attempt(&key.link()).into(),
            job_state: vec!["FAILED".into()],
            ..Default::default()
        };
        assert!(is_failed_attempt(&refused));
        assert_eq!(PodKey::from_link(&refused.admin_comment), Some(key.clone()));
        let killed = crate::slurm::Job { nodes: "n1".into(), ..refused };
        assert!(is_failed_attempt(&killed), "granted, then killed as its answer could not be delivered");
        let cancelled = crate::slurm::Job { job_state: vec!["CANCELLED".into()], ..killed.clone() };
        assert!(!is_failed_attempt(&cancelled), "an allocation that held its node ends its pod as any job does");
        let running = crate::slurm::Job { job_state: vec!["RUNNING".into()], ..killed };
        assert!(!is_failed_attempt(&running));
        assert!(!is_replaced(&crate::slurm::Job { admin_comment: key.link().into(), ..Default::default() }));
    }
}
