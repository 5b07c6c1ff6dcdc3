//! Bursts of pods as job arrays: while one submission is in flight, the pods that arrive wait, and
//! the next turn submits all of them together, one job array per shape of job (whatever differs only
//! in the pod's name), so a burst of N pods costs slurmctld a few RPCs instead of N. A pod that finds
//! nobody waiting goes alone, as before (the fast path, then a job of its own), so a single pod is
//! placed as quickly as ever.
//!
//! Each task is its pod's placeholder: its `admin_comment` ([`ArrayLink`]) names the pod of every task,
//! Slurm schedules each task on its own, and `<array>_<task>` cancels one without its siblings.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::channel::oneshot;
use tokio::sync::OwnedMutexGuard;

use super::link::{ArrayLink, Installation, PodKey};
use super::timing::{BURST_LINGERS, LONGEST_TURN};
use crate::slurm::{JobDescription, SharedText, Slurm, SlurmError};

/// The most tasks one array gets (Slurm's `MaxArraySize` defaults to 1001; the link in every task's
/// admin comment grows with each pod).
pub const MAX_TASKS: usize = 100;

/// What became of a pod handed to [`Batches::join`].
pub enum Turn {
    /// Nobody else was waiting: submit the pod alone. Pods arriving meanwhile wait, and go together in
    /// the next turn, which begins when this one is dropped or has lasted [`LONGEST_TURN`].
    Alone(TimedTurn),
    /// Submitted together with other pods: this pod's task, or why Slurm did not take the array.
    Task(Result<ArrayTask, Arc<SlurmError>>),
}

/// One pod's task in a submitted array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArrayTask {
    pub array_job_id: u32,
    pub task: u32,
    /// The array's admin comment (what Slurm will list for the task), one for all its tasks.
    pub admin_comment: SharedText,
}

/// A turn that ends when dropped or after [`LONGEST_TURN`], whichever comes first.
pub struct TimedTurn(tokio::task::JoinHandle<()>);

impl TimedTurn {
    fn new(turn: OwnedMutexGuard<()>) -> Self {
        Self(tokio::spawn(async move {
            tokio::time::sleep(LONGEST_TURN).await;
            drop(turn);
        }))
    }
}

impl Drop for TimedTurn {
    fn drop(&mut self) {
        // Aborting the task drops the guard it holds, if it still does.
        self.0.abort();
    }
}

struct Waiting {
    pod: PodKey,
    description: JobDescription,
    answer: oneshot::Sender<Result<ArrayTask, Arc<SlurmError>>>,
}

/// The pods waiting for their turn to be submitted. Cheap to clone; one per scheduler.
#[derive(Clone)]
pub struct Batches {
    waiting: Arc<Mutex<Vec<Waiting>>>,
    turn: Arc<tokio::sync::Mutex<()>>,
    max_tasks: usize,
    /// Whose arrays these are (their links say so).
    installation: Arc<Installation>,
    /// When the last array was submitted.
    last_array: Arc<Mutex<Option<Instant>>>,
}

impl Batches {
    /// Arrays of at most `max_tasks` tasks, linked as `installation`'s; 1 submits every pod alone.
    pub fn new(max_tasks: usize, installation: Installation) -> Self {
        let max_tasks = max_tasks.clamp(1, MAX_TASKS);
        Self {
            waiting: Arc::default(),
            turn: Arc::default(),
            max_tasks,
            installation: Arc::new(installation),
            last_array: Arc::default(),
        }
    }

    /// Whether a burst is on: an array went less than [`BURST_LINGERS`] ago. A pod alone in its turn
    /// then is queued rather than allocated at once: Slurm refuses an immediate allocation while the
    /// burst's jobs are pending ahead of it (a round trip, and a FAILED record, for nothing), and one
    /// it granted would overtake the pods that came before.
    pub fn in_burst(&self) -> bool {
        let last = *self.last_array.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        last.is_some_and(|at| at.elapsed() < BURST_LINGERS)
    }

    /// Waits for this pod's turn. Whoever gets the turn submits everything waiting by then; the pod
    /// that gets it finding only itself waiting goes alone.
    pub async fn join(&self, slurm: &dyn Slurm, pod: PodKey, description: JobDescription) -> Turn {
        if self.max_tasks == 1 {
            return Turn::Alone(TimedTurn::new(self.turn.clone().lock_owned().await));
        }
        let (answer, mut answered) = oneshot::channel();
        let uid = pod.uid.clone();
        self.lock().push(Waiting { pod, description, answer });
        loop {
            tokio::select! {
                biased;
                result = &mut answered => {
                    // A sender is only dropped unanswered if its turn's task was cancelled mid-way.
                    return Turn::Task(result.unwrap_or_else(|_| Err(Arc::new(SlurmError::NotSubmitted(Vec::new())))));
                }
                turn = self.turn.clone().lock_owned() => {
                    let batch = std::mem::take(&mut *self.lock());
                    if batch.is_empty() {
                        continue; // this pod's answer is on its way
                    }
                    if let [only] = batch.as_slice() && only.pod.uid == uid {
                        return Turn::Alone(TimedTurn::new(turn));
                    }
                    // Timed like a lone pod's turn: a stalled array must not hold up the pods behind it.
                    let _turn = TimedTurn::new(turn);
                    self.submit_together(slurm, batch).await;
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Waiting>> {
        self.waiting.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// One array per namespace and shape (at most `max_tasks` pods each), every pod answered. The link
    /// names pods by namespace, so pods of other namespaces go in arrays of their own.
    async fn submit_together(&self, slurm: &dyn Slurm, batch: Vec<Waiting>) {
        *self.last_array.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(Instant::now());
        let mut shapes: BTreeMap<(String, String), Vec<Waiting>> = BTreeMap::new();
        for waiting in batch {
            let key = (waiting.pod.namespace.clone(), shape(&waiting.description));
            shapes.entry(key).or_default().push(waiting);
        }
        for (_, pods) in shapes {
            let mut pods = pods.into_iter().peekable();
            while pods.peek().is_some() {
                let chunk: Vec<Waiting> = pods.by_ref().take(self.max_tasks).collect();
                submit_array(slurm, chunk, &self.installation).await;
            }
        }
    }
}

/// What makes two pods' jobs the same but for whose they are: everything except name and link.
fn shape(description: &JobDescription) -> String {
    let anonymous = JobDescription { name: String::new(), admin_comment: None, ..description.clone() };
    serde_json::to_string(&anonymous).unwrap_or_default()
}

/// The array for pods of one namespace and shape; each task `i` is `pods[i]`'s.
pub fn array_description(pods: &[(PodKey, JobDescription)], installation: &Installation) -> Option<JobDescription> {
    let ((first, description), rest) = pods.split_first()?;
    let link = ArrayLink { namespace: first.namespace.clone(), members: pods.iter().map(|(p, _)| p.clone()).collect() };
    Some(JobDescription {
        name: match rest.len() {
            0 => description.name.clone(),
            more => format!("{} and {more} more", description.name),
        },
        admin_comment: Some(installation.sign(link.render())),
        array: Some(format!("0-{}", pods.len() - 1)),
        ..description.clone()
    })
}

/// Submits pods of one namespace and shape as one array, and tells each pod its task.
async fn submit_array(slurm: &dyn Slurm, pods: Vec<Waiting>, installation: &Installation) {
    let (members, answers): (Vec<_>, Vec<_>) = pods.into_iter().map(|w| ((w.pod, w.description), w.answer)).unzip();
    let Some(description) = array_description(&members, installation) else { return };
    let admin_comment = SharedText::from(description.admin_comment.as_deref().unwrap_or_default());
    let submitted = slurm.submit(&description).await.map_err(Arc::new);
    match &submitted {
        Ok(job_id) => tracing::info!(job = job_id, pods = members.len(), "submitted placeholders as one job array"),
        // Each pod hears of it as its own submission's failure (its condition, an Event).
        Err(error) => tracing::debug!(%error, pods = members.len(), "a job array was not submitted"),
    }
    for (task, answer) in (0u32..).zip(answers) {
        let result = submitted.clone().map(|array_job_id| ArrayTask {
            array_job_id,
            task,
            admin_comment: admin_comment.clone(),
        });
        let _ = answer.send(result);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::slurm::FakeSlurm;

    fn installation() -> Installation {
        Installation::new("sunk", "test-cluster")
    }

    fn pod(name: &str) -> (PodKey, JobDescription) {
        let key = PodKey { namespace: "ml".into(), name: name.into(), uid: format!("uid-{name}") };
        let description = JobDescription {
            name: format!("ml/{name}"),
            admin_comment: Some(key.link()),
            cpus_per_task: 1,
            ..Default::default()
        };
        (key, description)
    }

    #[test]
    fn an_array_names_each_tasks_pod_and_keeps_the_shape() {
        let pods = vec![pod("a"), pod("b"), pod("c")];
        let array = array_description(&pods, &installation()).unwrap();
        assert_eq!(array.array.as_deref(), Some("0-2"));
        assert_eq!(array.name, "ml/a and 2 more");
        let link = ArrayLink::parse(array.admin_comment.as_deref().unwrap()).unwrap();
        assert_eq!(link.members.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(shape(&array.clone()), shape(&JobDescription { array: Some("0-2".into()), ..pods[0].1.clone() }));
        assert_eq!(shape(&pods[0].1), shape(&pods[1].1), "pods differing only in name share a shape");
        let bigger = JobDescription { cpus_per_task: 2, ..pods[1].1.clone() };
        assert_ne!(shape(&pods[0].1), shape(&bigger));
    }

    /// Batches of a slurmrestd that is not there, and the turn of a first pod that found nobody waiting.
    async fn first_alone() -> (Batches, Arc<FakeSlurm>, TimedTurn) {
        let batches = Batches::new(MAX_TASKS, installation());
        let slurm = Arc::new(FakeSlurm::default());
        slurm.set_reachable(false);
        let (key, description) = pod("first");
        let Turn::Alone(turn) = batches.join(slurm.as_ref(), key, description).await else { panic!("not alone") };
        (batches, slurm, turn)
    }

    #[tokio::test]
    async fn a_pod_with_nobody_waiting_goes_alone_and_holds_the_turn() {
        let (batches, _slurm, turn) = first_alone().await;
        assert!(batches.turn.try_lock().is_err(), "the turn is held while the pod is submitted");
        drop(turn);
        let next = tokio::time::timeout(Duration::from_secs(5), batches.turn.lock()).await;
        assert!(next.is_ok(), "the next turn may begin once the pod is submitted");
    }

    #[tokio::test]
    async fn a_slow_submission_lets_the_next_turn_begin() {
        let (batches, _slurm, turn) = first_alone().await;
        // Still submitting (the turn is not dropped): the next turn begins after LONGEST_TURN anyway.
        let next = tokio::time::timeout(Duration::from_secs(5), batches.turn.lock()).await;
        assert!(next.is_ok(), "a stalled submission held every other pod");
        drop(turn);
    }

    #[tokio::test]
    async fn pods_arriving_during_a_turn_go_together_and_each_learns_the_outcome() {
        let (batches, slurm, turn) = first_alone().await;
        let waiters: Vec<_> = ["b", "c"]
            .into_iter()
            .map(|name| {
                let (batches, slurm) = (batches.clone(), slurm.clone());
                let (key, description) = pod(name);
                tokio::spawn(async move { batches.join(slurm.as_ref(), key, description).await })
            })
            .collect();
        while batches.lock().len() < 2 {
            tokio::task::yield_now().await;
        }
        assert!(!batches.in_burst(), "one pod alone is no burst");
        drop(turn);
        for waiter in waiters {
            // Both were in one array; slurmrestd is unreachable here, so both hear why.
            match waiter.await.unwrap() {
                Turn::Task(Err(error)) => assert!(error.is_unanswered(), "{error}"),
                _ => panic!("a waiting pod must be submitted with the others"),
            }
        }
        assert!(batches.in_burst(), "pods that arrive now belong to the burst");
    }
}
