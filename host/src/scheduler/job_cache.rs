//! What Slurm says about sunk's placeholder jobs, refreshed by one incremental listing per poll
//! (never one request per pod), and the pods to look at again when their job changed.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use crate::scheduler::watched_pod::WatchedPod;
use futures::channel::mpsc::UnboundedSender;
use kube::runtime::reflector::ObjectRef;

use super::link::{Installation, PodKey};
use crate::slurm::{Job, JobDescription, JobState, JobsPage, SharedText, Slurm, SlurmError};

/// A placeholder job as last seen.
#[derive(Debug, Clone, PartialEq)]
pub struct Placeholder {
    pub pod: PodKey,
    pub job: Job,
}

#[derive(Default)]
struct State {
    /// Placeholders by pod UID. Normally one; more only if something went wrong before.
    by_pod: HashMap<String, Vec<Placeholder>>,
    /// Every job that holds nodes now, sunk's or not (what preemption chooses among).
    holding: Arc<Vec<Job>>,
    /// Jobs submitted by this host since the listing that is about to replace the cache began.
    submitted: Vec<(Instant, Placeholder)>,
    /// Jobs this host cancelled since that listing began: a listing that began before a cancellation
    /// may still show the job running, and must not bring it back to life.
    cancelled: Vec<(Instant, Cancellation)>,
    /// Pods whose placeholders this host changed itself (cancelled) since the last listing: the next
    /// listing wakes them even if it shows just what was recorded, so no pod waits for a recheck.
    touched: HashSet<String>,
    /// When Slurm last refused a submission, by pod UID.
    refusals: HashMap<String, Instant>,
    /// When a submission's answer was lost (it may or may not have made a job), by pod UID.
    doubts: HashMap<String, Instant>,
    /// When the last complete listing began.
    listing_began: Option<Instant>,
    listed: bool,
    last_update: Option<u64>,
    /// When the listing now in flight began.
    listing_since: Option<Instant>,
    /// Why the last listing failed, if it did.
    last_error: Option<String>,
}

/// The pod's placeholders, made room for one: a `Vec`'s first push makes room for four, and a
/// placeholder is about 1 KB, so 10,000 waiting pods held 30 MB of room for jobs that never come.
fn placeholders_of<'a>(by_pod: &'a mut HashMap<String, Vec<Placeholder>>, uid: &str) -> &'a mut Vec<Placeholder> {
    by_pod.entry(uid.to_owned()).or_insert_with(|| Vec::with_capacity(1))
}

/// A job this host cancelled, named as Slurm was told (`12`, or `10_3` for an array's task), with the
/// admin comment it gave it first, if any (e.g. the replaced mark).
#[derive(Debug, Clone)]
struct Cancellation {
    target: String,
    admin_comment: Option<SharedText>,
}

impl Cancellation {
    fn is_of(&self, job: &Job) -> bool {
        job.target() == self.target || job.job_id.to_string() == self.target
    }

    /// Shows the job as Slurm will list it: cancelled, with its new comment, still holding its nodes
    /// until Slurm has cleaned up after it.
    fn apply(&self, by_pod: &mut HashMap<String, Vec<Placeholder>>, holding: &mut Arc<Vec<Job>>) -> Vec<String> {
        let mut pods = Vec::new();
        for placeholder in by_pod.values_mut().flatten().filter(|p| self.is_of(&p.job)) {
            pods.push(placeholder.pod.uid.clone());
            if placeholder.job.state() != JobState::Ended {
                placeholder.job.job_state = vec!["CANCELLED".into()];
            }
            if let Some(comment) = &self.admin_comment {
                placeholder.job.admin_comment = comment.clone();
            }
        }
        // Copied only when readers share the list and the job is in it.
        if holding.iter().any(|job| self.is_of(job)) {
            for job in Arc::make_mut(holding).iter_mut().filter(|job| self.is_of(job)) {
                if job.state() != JobState::Ended {
                    job.job_state = vec!["CANCELLED".into(), "COMPLETING".into()];
                }
                if let Some(comment) = &self.admin_comment {
                    job.admin_comment = comment.clone();
                }
            }
        }
        pods
    }
}

/// Shared, cheaply cloned view of sunk's placeholder jobs.
#[derive(Clone)]
pub struct JobCache {
    state: Arc<RwLock<State>>,
    /// Whose placeholders are this cache's: another installation's are not even listed.
    installation: Arc<Installation>,
}

#[cfg(test)]
impl Default for JobCache {
    fn default() -> Self {
        Self::new(Installation::new("sunk", "test-cluster"))
    }
}

impl JobCache {
    pub fn new(installation: Installation) -> Self {
        Self { state: Arc::default(), installation: Arc::new(installation) }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// True once a complete listing has arrived: before that, "no job" means "not known yet".
    pub fn is_listed(&self) -> bool {
        self.read().listed
    }

    /// The placeholders of one pod.
    pub fn for_pod(&self, uid: &str) -> Vec<Placeholder> {
        self.read().by_pod.get(uid).cloned().unwrap_or_default()
    }

    /// The placeholders that have not ended and that `wanted` picks. Only those are copied: a sweep
    /// over 10,000 waiting pods looks for the few whose pod is gone.
    pub fn live_where(&self, wanted: impl Fn(&Placeholder) -> bool) -> Vec<Placeholder> {
        let state = self.read();
        let live = state.by_pod.values().flatten().filter(|p| p.job.state() != JobState::Ended);
        live.filter(|p| wanted(p)).cloned().collect()
    }

    /// Every job that holds nodes now (running, or still cleaning up after it ended), sunk's or not.
    pub fn holding(&self) -> Arc<Vec<Job>> {
        self.read().holding.clone()
    }

    /// Remembers a job this host just submitted, so that it is known before Slurm lists it.
    pub fn record_submitted(&self, pod: PodKey, job_id: u32, submitted: &JobDescription) {
        let job = Job {
            job_id,
            job_state: vec!["PENDING".into()],
            excluded_nodes: submitted.excluded_nodes.join(","),
            admin_comment: submitted.admin_comment.as_deref().unwrap_or_default().into(),
            ..Default::default()
        };
        self.record_job(pod, job);
    }

    /// Remembers a job this host just made, as Slurm described it, before Slurm lists it.
    pub fn record_job(&self, pod: PodKey, job: Job) {
        let placeholder = Placeholder { pod, job };
        let mut state = self.write();
        // A listing may have brought the job before the answer that made it (slurmctld can be slow
        // to answer): one job is one placeholder, never a "duplicate" of itself.
        let jobs = state.by_pod.entry(placeholder.pod.uid.clone()).or_default();
        match jobs.iter_mut().find(|known| known.job.target() == placeholder.job.target()) {
            Some(known) => *known = placeholder.clone(),
            None => jobs.push(placeholder.clone()),
        }
        state.submitted.push((Instant::now(), placeholder));
    }

    /// Remembers that this host cancelled a job, named as Slurm was told (`12`, or `10_3` for an
    /// array's task), with the admin comment it gave it (e.g. the replaced mark), so that it is not
    /// taken for live, or for merely ended, before a listing that began after it.
    pub fn record_cancelled(&self, target: &str, admin_comment: Option<&str>) {
        let cancellation =
            Cancellation { target: target.to_owned(), admin_comment: admin_comment.map(SharedText::from) };
        let mut state = self.write();
        let State { by_pod, holding, touched, cancelled, .. } = &mut *state;
        touched.extend(cancellation.apply(by_pod, holding));
        cancelled.push((Instant::now(), cancellation));
    }

    /// Remembers that Slurm refused to take a job for this pod.
    pub fn record_refusal(&self, uid: &str) {
        self.write().refusals.insert(uid.to_string(), Instant::now());
    }

    /// Remembers that a submission for this pod got no answer: slurmrestd may still have made the job.
    pub fn record_in_doubt(&self, uid: &str) {
        self.write().doubts.insert(uid.to_string(), Instant::now());
    }

    /// Whether a lost submission for this pod may have made a job that no complete listing has shown
    /// yet: until one that began after it arrives, submitting again could make a second job.
    pub fn in_doubt(&self, uid: &str) -> bool {
        let mut state = self.write();
        let listed_since = state.listing_began;
        state.doubts.retain(|_, at| listed_since.is_none_or(|began| began <= *at));
        state.doubts.contains_key(uid)
    }

    /// When Slurm refused this pod's job, if that was less than `within` ago.
    pub fn recent_refusal(&self, uid: &str, within: Duration) -> Option<Instant> {
        let mut state = self.write();
        state.refusals.retain(|_, at| at.elapsed() < within);
        state.refusals.get(uid).copied()
    }

    /// Replaces the cache with a complete listing that began at `began`; returns the pods whose
    /// placeholders changed.
    fn replace(&self, mut jobs: Vec<Job>, last_update: u64, began: Instant) -> Vec<PodKey> {
        // Another installation's placeholders are neither ours to bind or cancel nor candidates for
        // our preemption: its pods, PodDisruptionBudgets and grace periods are out of our sight.
        jobs.retain(|job| !self.installation.is_foreign(&job.admin_comment));
        let mut by_pod: HashMap<String, Vec<Placeholder>> = HashMap::new();
        let holding: Vec<Job> = jobs.iter().filter(|job| job.holds_nodes()).cloned().collect();
        for job in jobs {
            // A gang's job is listed under every member; tasks of an array pending together, each
            // under its own pod.
            for (pod, job) in super::link::linked(&job) {
                placeholders_of(&mut by_pod, &pod.uid).push(Placeholder { pod, job });
            }
        }
        let mut holding = Arc::new(holding);
        let mut state = self.write();
        // A submission the listing may have missed stays until a later listing includes it.
        state.submitted.retain(|(at, _)| *at >= began);
        for (_, placeholder) in &state.submitted {
            let jobs = placeholders_of(&mut by_pod, &placeholder.pod.uid);
            // An array's task is the same job pending with its siblings and running on its own.
            if !jobs.iter().any(|known| known.job.target() == placeholder.job.target()) {
                jobs.push(placeholder.clone());
            }
        }
        // So does a cancellation the listing may have missed.
        state.cancelled.retain(|(at, _)| *at >= began);
        for (_, cancellation) in &state.cancelled {
            cancellation.apply(&mut by_pod, &mut holding);
        }
        let mut changed: Vec<PodKey> = by_pod
            .iter()
            .filter(|(uid, jobs)| state.by_pod.get(*uid) != Some(*jobs))
            .filter_map(|(_, jobs)| jobs.first().map(|p| p.pod.clone()))
            .collect();
        changed.extend(
            state
                .by_pod
                .iter()
                .filter(|(uid, _)| !by_pod.contains_key(*uid))
                .filter_map(|(_, jobs)| jobs.first().map(|p| p.pod.clone())),
        );
        let touched: Vec<PodKey> = std::mem::take(&mut state.touched)
            .iter()
            .filter(|uid| !changed.iter().any(|pod| &pod.uid == *uid))
            .filter_map(|uid| by_pod.get(uid).or_else(|| state.by_pod.get(uid))?.first().map(|p| p.pod.clone()))
            .collect();
        changed.extend(touched);
        state.by_pod = by_pod;
        state.holding = holding;
        state.listed = true;
        state.listing_began = Some(began);
        if last_update > 0 {
            state.last_update = Some(last_update);
        }
        changed
    }

    /// Lists jobs once; returns the pods whose placeholders changed. While a submission is in doubt
    /// the listing is a full one: an incremental one may answer "unchanged" for ever (nothing else
    /// happening), and Slurm's whole-second times could hide a job made in the last listing's second.
    pub async fn refresh(&self, slurm: &dyn Slurm) -> Result<Vec<PodKey>, SlurmError> {
        let began = Instant::now();
        let since = {
            let mut state = self.write();
            state.listing_since = Some(began);
            if state.doubts.is_empty() { state.last_update } else { None }
        };
        let listed = slurm.jobs(since).await;
        {
            let mut state = self.write();
            state.listing_since = None;
            state.last_error = listed.as_ref().err().map(ToString::to_string);
        }
        match listed? {
            JobsPage::Unchanged => Ok(Vec::new()),
            JobsPage::All { jobs, last_update } => Ok(self.replace(jobs, last_update, began)),
        }
    }

    /// Why Slurm's jobs cannot be read now, if they cannot: the last listing failed, or the one in
    /// flight has had no answer for longer than `patience`.
    pub fn unreachable(&self, patience: Duration) -> Option<String> {
        let state = self.read();
        if let Some(error) = &state.last_error {
            return Some(error.clone());
        }
        let waited = state.listing_since?.elapsed();
        (waited > patience).then(|| format!("slurmrestd has not answered for {}s", waited.as_secs()))
    }
}

/// Refreshes the cache every `interval` and asks for the changed pods to be reconciled.
pub async fn poll(
    cache: JobCache,
    slurm: Arc<dyn Slurm>,
    interval: Duration,
    changed: UnboundedSender<ObjectRef<WatchedPod>>,
) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        match cache.refresh(slurm.as_ref()).await {
            Ok(pods) => {
                for pod in pods {
                    let _ = changed.unbounded_send(ObjectRef::new(&pod.name).within(&pod.namespace));
                }
            }
            Err(error) => tracing::warn!(%error, "listing Slurm jobs failed; keeping the last known state"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: u32, uid: &str, state: &str) -> Job {
        let pod = PodKey { namespace: "ns".into(), name: format!("pod-{uid}"), uid: uid.into() };
        Job { job_id: id, admin_comment: pod.link().into(), job_state: vec![state.into()], ..Default::default() }
    }

    #[test]
    fn another_installations_placeholders_are_not_ours_nor_candidates() {
        let cache = JobCache::default();
        let on_n1 = |job: Job| Job { nodes: "n1".into(), ..job };
        let signed = |job: Job, by: &Installation| {
            on_n1(Job { admin_comment: by.sign(job.admin_comment.to_string()).into(), ..job })
        };
        let ours = signed(job(1, "a", "RUNNING"), &Installation::new("sunk", "test-cluster"));
        let other_cluster = signed(job(2, "b", "RUNNING"), &Installation::new("sunk", "another-cluster"));
        let other_release = signed(job(3, "c", "RUNNING"), &Installation::new("sunk-gpu", "test-cluster"));
        let legacy = on_n1(job(4, "d", "RUNNING"));
        let slurm_users = on_n1(Job { job_id: 5, job_state: vec!["RUNNING".into()], ..Default::default() });
        cache.replace(vec![ours, other_cluster, other_release, legacy, slurm_users], 100, Instant::now());
        assert_eq!(cache.for_pod("a").len(), 1);
        assert!(cache.for_pod("b").is_empty() && cache.for_pod("c").is_empty());
        assert_eq!(cache.for_pod("d").len(), 1, "a link from before installations were named is still ours");
        let mut candidates: Vec<u32> = cache.holding().iter().map(|job| job.job_id).collect();
        candidates.sort_unstable();
        assert_eq!(candidates, [1, 4, 5], "another installation's jobs are not even preemption candidates");
    }

    #[test]
    fn a_pod_with_one_placeholder_holds_room_for_one() {
        let cache = JobCache::default();
        let pod = PodKey { namespace: "ns".into(), name: "pod-c".into(), uid: "c".into() };
        cache.record_submitted(pod, 7, &JobDescription::default());
        cache.replace(
            vec![job(1, "a", "PENDING"), job(2, "b", "RUNNING")],
            100,
            Instant::now() - Duration::from_secs(1),
        );
        let state = cache.read();
        assert_eq!(state.by_pod.len(), 3);
        assert!(state.by_pod.values().all(|placeholders| placeholders.capacity() == 1));
    }

    #[test]
    fn keeps_a_fresh_submission_that_the_listing_missed() {
        let cache = JobCache::default();
        let began = Instant::now();
        let pod = PodKey { namespace: "ns".into(), name: "pod-a".into(), uid: "a".into() };
        cache.record_submitted(pod, 7, &JobDescription::default());
        cache.replace(vec![job(3, "b", "RUNNING")], 100, began);
        assert_eq!(cache.for_pod("a")[0].job.job_id, 7);
        // A listing that began after the submission is the truth.
        cache.replace(vec![job(3, "b", "RUNNING")], 101, Instant::now());
        assert!(cache.for_pod("a").is_empty());
    }

    #[test]
    fn a_job_listed_before_its_answer_arrived_stays_one_placeholder() {
        let cache = JobCache::default();
        cache.replace(vec![job(9, "a", "RUNNING")], 100, Instant::now());
        let pod = PodKey { namespace: "ns".into(), name: "pod-a".into(), uid: "a".into() };
        cache.record_job(pod, job(9, "a", "RUNNING"));
        let placeholders = cache.for_pod("a");
        assert_eq!(placeholders.len(), 1, "{placeholders:?}");
        assert_eq!(placeholders[0].job.job_id, 9);
    }

    #[test]
    fn an_array_task_is_one_placeholder_pending_with_its_siblings_and_running_alone() {
        use crate::scheduler::link::ArrayLink;
        use crate::slurm::NoValue;
        let pods: Vec<PodKey> = ["a", "b"]
            .iter()
            .map(|uid| PodKey { namespace: "ns".into(), name: format!("pod-{uid}"), uid: (*uid).into() })
            .collect();
        let link = ArrayLink { namespace: "ns".into(), members: pods.clone() }.render();
        let cache = JobCache::default();
        // As the submit path records task 0 before any listing.
        let pending = Job {
            job_id: 50,
            admin_comment: link.into(),
            job_state: vec!["PENDING".into()],
            array_job_id: NoValue::of(50),
            ..Default::default()
        };
        let submitted = Job { array_task_id: NoValue::of(0), ..pending.clone() };
        cache.record_job(pods[0].clone(), submitted.clone());
        let began = Instant::now();
        // Task 0 started as job 51; task 1 still pends in the array's record.
        let running = Job { job_id: 51, job_state: vec!["RUNNING".into()], nodes: "n1".into(), ..submitted };
        let pending = Job { array_task_string: "1".into(), ..pending };
        cache.replace(vec![running, pending], 3, began - Duration::from_secs(1));
        let a = cache.for_pod("a");
        assert_eq!(a.len(), 1, "never a duplicate of itself: {a:?}");
        assert_eq!((a[0].job.job_id, a[0].job.state()), (51, JobState::Running));
        let b = cache.for_pod("b");
        assert_eq!((b.len(), b[0].job.target(), b[0].job.state()), (1, "50_1".to_string(), JobState::Pending));
        cache.record_cancelled("50_1", None);
        assert_eq!(cache.for_pod("b")[0].job.state(), JobState::Ended);
        assert_eq!(cache.for_pod("a")[0].job.state(), JobState::Running, "a sibling's cancel is not this task's");
    }

    #[test]
    fn a_listing_without_answer_or_failing_makes_slurm_unreachable() {
        let cache = JobCache::default();
        assert_eq!(cache.unreachable(Duration::ZERO), None);
        cache.write().listing_since = Some(Instant::now() - Duration::from_secs(12));
        assert_eq!(cache.unreachable(Duration::from_secs(60)), None);
        let why = cache.unreachable(Duration::from_secs(10)).unwrap();
        assert!(why.contains("not answered for 12s"), "{why}");
        cache.write().last_error = Some("cannot reach slurmrestd: connection refused".into());
        assert!(cache.unreachable(Duration::from_secs(60)).unwrap().contains("connection refused"));
    }

    #[test]
    fn a_cancelled_job_reads_as_over_with_its_new_comment_until_listed() {
        let cache = JobCache::default();
        cache.replace(vec![job(4, "a", "RUNNING")], 1, Instant::now());
        cache.record_cancelled("4", Some("marked"));
        let known = &cache.for_pod("a")[0].job;
        assert_eq!((known.state(), known.admin_comment.as_str()), (JobState::Ended, "marked"));
    }

    #[test]
    fn a_listing_that_began_before_a_cancellation_does_not_bring_the_job_back() {
        // The CI failure this guards against: a job replaced (marked, cancelled) while a listing was in
        // flight came back RUNNING with that listing, beside its successor, and the successor was
        // cancelled as the duplicate.
        let cache = JobCache::default();
        let on_n4 = |job: Job| Job { nodes: "n4".into(), ..job };
        cache.replace(vec![on_n4(job(56, "a", "RUNNING"))], 1, Instant::now());
        let began = Instant::now();
        cache.record_cancelled("56", Some("marked"));
        let pod = PodKey { namespace: "ns".into(), name: "pod-a".into(), uid: "a".into() };
        cache.record_submitted(pod, 57, &JobDescription::default());
        cache.replace(vec![on_n4(job(56, "a", "RUNNING"))], 2, began);
        let states: Vec<_> = cache.for_pod("a").iter().map(|p| (p.job.job_id, p.job.state())).collect();
        assert_eq!(states, [(56, JobState::Ended), (57, JobState::Pending)]);
        assert_eq!(cache.for_pod("a")[0].job.admin_comment, "marked");
        assert!(cache.holding().iter().all(|job| job.job_id != 56 || job.state() == JobState::Ended));
        // A listing that began after the cancellation is the truth.
        cache.replace(vec![on_n4(job(56, "a", "COMPLETED"))], 3, Instant::now());
        assert_eq!(cache.for_pod("a")[0].job.admin_comment, job(56, "a", "RUNNING").admin_comment);
    }

    #[test]
    fn a_pod_whose_job_this_host_cancelled_is_woken_by_the_next_listing_even_if_it_shows_the_same() {
        let cache = JobCache::default();
        let mut gang = job(4, "a", "RUNNING");
        gang.admin_comment = "sunk.dev/gang=ns/g/pod-a:a,pod-b:b".into();
        cache.replace(vec![gang.clone()], 1, Instant::now());
        cache.record_cancelled("4", None);
        // Slurm lists it CANCELLED, exactly as recorded: both members must still look again.
        let cancelled = Job { job_state: vec!["CANCELLED".into()], ..gang };
        let mut woken: Vec<String> =
            cache.replace(vec![cancelled.clone()], 2, Instant::now()).into_iter().map(|p| p.uid).collect();
        woken.sort();
        assert_eq!(woken, ["a", "b"]);
        assert!(cache.replace(vec![cancelled], 3, Instant::now()).is_empty(), "once is enough");
    }

    #[test]
    fn a_lost_submission_is_in_doubt_until_a_later_listing() {
        let cache = JobCache::default();
        let before = Instant::now();
        cache.record_in_doubt("a");
        assert!(cache.in_doubt("a"));
        cache.replace(vec![], 1, before);
        assert!(cache.in_doubt("a"), "a listing that began before the submission proves nothing");
        cache.replace(vec![], 2, Instant::now());
        assert!(!cache.in_doubt("a"));
    }

    #[test]
    fn reports_pods_whose_jobs_changed_and_ignores_foreign_jobs() {
        let cache = JobCache::default();
        let mut foreign = job(9, "x", "RUNNING");
        foreign.admin_comment = SharedText::default();
        let changed = cache.replace(vec![job(1, "a", "PENDING"), foreign.clone()], 5, Instant::now());
        assert_eq!(changed.len(), 1);
        assert!(cache.is_listed());
        let changed = cache.replace(vec![job(1, "a", "PENDING"), foreign], 6, Instant::now());
        assert!(changed.is_empty());
        let changed = cache.replace(vec![job(1, "a", "RUNNING")], 7, Instant::now());
        assert_eq!(changed[0].uid, "a");
        let changed = cache.replace(vec![], 8, Instant::now());
        assert_eq!(changed[0].uid, "a");
        assert_eq!(cache.read().last_update, Some(8));
    }
}
