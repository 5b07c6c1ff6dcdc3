//! How one job array stands for a batch of pods, in its `admin_comment`:
//! `sunk.dev/array=<namespace>/<pod>:<uid>,<pod>:<uid>...`, task `i` being the `i`-th pod. Slurm copies
//! the comment to every task as it starts, so each task, and each record of tasks still pending
//! together, names its own pods after any restart.

use super::PodKey;
use super::{parse_members, render_members};
use crate::slurm::{Job, NoValue};

use crate::vocabulary::ARRAY_LINK;

/// An array job's link: task `i` stands for `members[i]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArrayLink {
    pub namespace: String,
    pub members: Vec<PodKey>,
}

impl ArrayLink {
    pub fn render(&self) -> String {
        format!("{ARRAY_LINK}{}/{}", self.namespace, render_members(&self.members))
    }

    /// The link in a job's `admin_comment`, if the job is one of sunk's arrays (a `;mark` is ignored).
    pub fn parse(admin_comment: &str) -> Option<Self> {
        let rest = admin_comment.strip_prefix(ARRAY_LINK)?;
        let rest = rest.split_once(';').map_or(rest, |(link, _mark)| link);
        let (namespace, members) = rest.split_once('/')?;
        let members = parse_members(namespace, members)?;
        (!namespace.is_empty()).then(|| Self { namespace: namespace.to_owned(), members })
    }

    /// Each pod a record of this array stands for, with the record as that pod's own job: a task
    /// that runs is its own record; tasks still pending together are one record, split here per task
    /// (with its task id, so that it is cancelled or changed alone, as `<array>_<task>`).
    pub fn placeholders(&self, job: &Job) -> Vec<(PodKey, Job)> {
        if job.array_task().is_some() {
            let (_, task) = job.array_task().expect("checked");
            return self.member(task).map(|pod| vec![(pod, job.clone())]).unwrap_or_default();
        }
        let array = job.array_job_id.get().filter(|id| *id > 0).unwrap_or(u64::from(job.job_id));
        crate::slurm::array_task_ids(&job.array_task_string)
            .into_iter()
            .filter_map(|task| {
                let pod = self.member(task)?;
                let task_job = Job {
                    array_job_id: NoValue::of(array),
                    array_task_id: NoValue::of(task.into()),
                    array_task_string: String::new(),
                    ..job.clone()
                };
                Some((pod, task_job))
            })
            .collect()
    }

    /// The pods whose tasks `job`'s cut list may hide (see `Job::array_tasks_cut`): those after the
    /// last task it shows. Whether each still pends in the record cannot be told from it.
    pub fn past_the_cut(&self, job: &Job) -> &[PodKey] {
        if !job.array_tasks_cut() {
            return &[];
        }
        let last_shown = crate::slurm::array_task_ids(&job.array_task_string).into_iter().max();
        let first_hidden = last_shown.map_or(0, |task| task as usize + 1);
        self.members.get(first_hidden..).unwrap_or_default()
    }

    fn member(&self, task: u32) -> Option<PodKey> {
        self.members.get(usize::try_from(task).ok()?).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str, uid: &str) -> PodKey {
        PodKey { namespace: "ml".into(), name: name.into(), uid: uid.into() }
    }

    fn link() -> ArrayLink {
        ArrayLink { namespace: "ml".into(), members: vec![key("a", "u0"), key("b", "u1"), key("c", "u2")] }
    }

    #[test]
    fn a_link_names_every_pod_in_task_order() {
        let text = link().render();
        assert_eq!(text, "sunk.dev/array=ml/a:u0,b:u1,c:u2");
        assert_eq!(ArrayLink::parse(&text), Some(link()));
        assert_eq!(ArrayLink::parse(&format!("{text};replaced")), Some(link()));
        assert_eq!(ArrayLink::parse("sunk.dev/pod=ml/a/u0"), None);
        assert_eq!(ArrayLink::parse("sunk.dev/array=ml/"), None);
        assert_eq!(ArrayLink::parse("sunk.dev/array=/a:u0"), None);
    }

    #[test]
    fn pending_tasks_are_each_their_pods_own_job_and_a_running_task_is_one_pod() {
        let pending = Job {
            job_id: 40,
            array_job_id: NoValue::of(40),
            array_task_string: "1-2".into(),
            job_state: vec!["PENDING".into()],
            ..Default::default()
        };
        let split = link().placeholders(&pending);
        let names: Vec<(&str, String)> = split.iter().map(|(pod, job)| (pod.name.as_str(), job.target())).collect();
        assert_eq!(names, [("b", "40_1".to_string()), ("c", "40_2".to_string())]);
        let running = Job {
            job_id: 41,
            array_job_id: NoValue::of(40),
            array_task_id: NoValue::of(0),
            job_state: vec!["RUNNING".into()],
            ..Default::default()
        };
        let one = link().placeholders(&running);
        assert_eq!(one.len(), 1);
        assert_eq!((one[0].0.name.as_str(), one[0].1.target(), one[0].1.job_id), ("a", "40_0".into(), 41));
        let beyond = Job { array_task_id: NoValue::of(9), ..running };
        assert!(link().placeholders(&beyond).is_empty(), "a task without a pod stands for none");
    }
}
