//! What Slurm says about sunk's placeholder jobs, refreshed by one incremental listing per poll
//! (never one request per pod), and the pods to look at again when their job changed.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use crate::scheduler::watched_pod::WatchedPod;
use futures::channel::mpsc::UnboundedSender;
use kube::runtime::reflector::ObjectRef;

use super::job_poll::{self, AfterStates, FullListing, JobPoll};
use super::link::{ArrayLink, Installation, PodKey};
use super::placeholder::Placeholder;
use crate::slurm::{Job, JobDescription, JobState, JobStates, JobsPage, SharedText, Slurm, SlurmError};

/// What one poll brought.
enum Listed {
    /// No job's state moved since the last full listing, which stands.
    Standing,
    /// A listing, and the states asked for before it, if they were.
    Page(JobsPage, Option<JobStates>),
}

#[derive(Default)]
struct State {
    /// Placeholders by pod UID. Normally one; more only if something went wrong before.
    by_pod: HashMap<String, Vec<Placeholder>>,
    /// Every job that holds nodes now, sunk's or not (what preemption chooses among), hold jobs aside.
    holding: Arc<Vec<Job>>,
    /// This installation's hold jobs that have not ended (see `pool::holds`).
    holds: Arc<Vec<Job>>,
    /// Jobs submitted by this host since the listing that is about to replace the cache began, as
    /// last known (submitted, or read alone since).
    submitted: Vec<(Instant, Placeholder)>,
    /// Those of them their pods' passes read alone, by job id (an array's, for its tasks; see
    /// [`JobCache::unlisted_queued`]).
    read_alone: HashSet<u32>,
    /// Jobs this host cancelled since that listing began: a listing that began before a cancellation
    /// may still show the job running, and must not bring it back to life.
    cancelled: Vec<(Instant, Cancellation)>,
    /// Pods whose placeholders this host changed itself (cancelled) since the last listing: the next
    /// listing wakes them even if it shows just what was recorded, so no pod waits for a recheck.
    touched: HashSet<String>,
    /// When Slurm last refused a submission, by pod UID.
    refusals: HashMap<String, Instant>,
    /// When this host last queued a job for the pod, by pod UID.
    queued: HashMap<String, Instant>,
    /// When a submission's answer was lost (it may or may not have made a job), by pod UID.
    doubts: HashMap<String, Instant>,
    /// When the last complete listing began.
    listing_began: Option<Instant>,
    listed: bool,
    last_update: Option<u64>,
    /// The last full listing, and the jobs' states just before it: whether the next poll needs one.
    full_listing: Option<FullListing>,
    /// When the listing now in flight began.
    listing_since: Option<Instant>,
    /// Why the last listing failed, if it did.
    last_error: Option<String>,
}

/// Says once per process that slurmrestd cuts arrays' task lists short: the pods of the tasks past
/// the cut wait (whether they have a job is in doubt) and, once those pods are gone, the cut tasks are
/// never cancelled. The chart's slurmrestd lists them in full.
fn warn_of_cut_task_lists(arrays: usize) {
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| {
        tracing::warn!(
            arrays,
            "slurmrestd cuts the lists of job arrays' pending tasks short (`1-3,6-7,...`), so the pods of \
             those tasks wait, their jobs unknown: run slurmrestd with SLURM_BITSTR_LEN=0 in its environment"
        );
    });
}

/// How much of `window` is left since `uid`'s moment in `times`, if any is; moments whose window is
/// over are forgotten.
fn left_of(times: &mut HashMap<String, Instant>, uid: &str, window: Duration) -> Option<Duration> {
    times.retain(|_, at| at.elapsed() < window);
    times.get(uid).map(|at| window.saturating_sub(at.elapsed()))
}

/// The pod's placeholders, made room for one: a `Vec`'s first push makes room for four, and a
/// placeholder is about 1 KB, so 10,000 waiting pods would hold 30 MB of room for jobs that never come.
fn placeholders_of<'a>(by_pod: &'a mut HashMap<String, Vec<Placeholder>>, uid: &str) -> &'a mut Vec<Placeholder> {
    by_pod.entry(uid.to_owned()).or_insert_with(|| Vec::with_capacity(1))
}

/// A job this host cancelled, named as Slurm was told (`12`, or `10_3` for an array's task), with the
/// admin comment it gave it first, if any (e.g. the replaced mark).
#[derive(Debug, Clone)]
struct Cancellation {
    target: String,
    admin_comment: Option<SharedText>,
    /// The comment is this host's alone: Slurm could not be given it (see [`JobCache::record_replaced`]).
    kept_here: bool,
}

/// How long a mark Slurm could not keep is kept here: longer than Slurm lists an ended job (its
/// `MinJobAge`, 300 s by default), so no listing shows the job without it.
const MARK_KEPT_FOR: Duration = Duration::from_secs(15 * 60);

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
    /// From how many jobs a poll asks for their states first ([`job_poll::STATES_FIRST_FROM_JOBS`]).
    states_first_from: usize,
}

#[cfg(test)]
impl Default for JobCache {
    fn default() -> Self {
        Self::new(Installation::new("sunk", "test-cluster"))
    }
}

impl JobCache {
    pub fn new(installation: Installation) -> Self {
        Self {
            state: Arc::default(),
            installation: Arc::new(installation),
            states_first_from: job_poll::STATES_FIRST_FROM_JOBS,
        }
    }

    #[cfg(test)]
    fn with_states_first_from(self, jobs: usize) -> Self {
        Self { states_first_from: jobs, ..self }
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

    /// Whether the pod has a placeholder that has not ended.
    pub fn has_live_job(&self, uid: &str) -> bool {
        self.read()
            .by_pod
            .get(uid)
            .is_some_and(|placeholders| placeholders.iter().any(|p| p.job.state() != JobState::Ended))
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

    /// The hold jobs that have not ended, as the last complete listing showed them, and when that
    /// listing began; none before the first.
    pub fn hold_jobs(&self) -> Option<(Instant, Arc<Vec<Job>>)> {
        let state = self.read();
        Some((state.listing_began?, state.holds.clone()))
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
    pub fn record_job(&self, pod: PodKey, mut job: Job) {
        self.adopt_sealed(&mut job);
        let placeholder = Placeholder { pod, job };
        let mut state = self.write();
        // A listing may have brought the job before the answer that made it (slurmctld can be slow
        // to answer): one job is one placeholder, never a "duplicate" of itself.
        let jobs = placeholders_of(&mut state.by_pod, &placeholder.pod.uid);
        match jobs.iter_mut().find(|known| known.job.target() == placeholder.job.target()) {
            Some(known) => *known = placeholder.clone(),
            None => jobs.push(placeholder.clone()),
        }
        if placeholder.job.state() == JobState::Pending {
            state.queued.insert(placeholder.pod.uid.clone(), Instant::now());
        }
        let is_known = |(_, known): &(Instant, Placeholder)| {
            known.pod.uid == placeholder.pod.uid && known.job.target() == placeholder.job.target()
        };
        state.submitted.retain(|entry| !is_known(entry));
        state.submitted.push((Instant::now(), placeholder));
    }

    /// The job this host queued for the pod (`12`, or `10_3` for an array's task), if no listing has
    /// shown it yet, it has had `settle` to start, and no pass read it (or its array) alone before: the
    /// pod's pass reads it itself ([`Self::read_alone`]) rather than wait for a listing, which takes
    /// seconds at thousands of jobs. Once per job and once per array: one read answers for every task
    /// of an array, and the pods of those that started are woken by it.
    pub fn unlisted_queued(&self, uid: &str, settle: Duration) -> Option<String> {
        let mut state = self.write();
        let queued = state.submitted.iter().find(|(at, placeholder)| {
            placeholder.pod.uid == uid && at.elapsed() >= settle && placeholder.job.state() == JobState::Pending
        });
        let job = &queued?.1.job;
        let (read_as, target) = (job.array_task().map_or(job.job_id, |(array, _)| array), job.target());
        state.read_alone.insert(read_as).then_some(target)
    }

    /// Reads one job alone (an array's task: every record of its array) and records the records that
    /// run; the pods they run for.
    pub async fn read_alone(&self, slurm: &dyn Slurm, target: String) -> Result<Vec<PodKey>, SlurmError> {
        let records = slurm.job_records(&target).await?;
        let mut running_for = Vec::new();
        for mut job in records.into_iter().filter(|job| job.state() == JobState::Running) {
            self.adopt_sealed(&mut job);
            for (pod, job) in super::link::linked(&job) {
                running_for.push(pod.clone());
                self.record_job(pod, job);
            }
        }
        Ok(running_for)
    }

    /// Remembers that this host cancelled a job, named as Slurm was told (`12`, or `10_3` for an
    /// array's task), with the admin comment it gave it (e.g. the replaced mark), so that it is not
    /// taken for live, or for merely ended, before a listing that began after it.
    pub fn record_cancelled(&self, target: &str, admin_comment: Option<&str>) {
        self.remember(Cancellation {
            target: target.to_owned(),
            admin_comment: admin_comment.map(SharedText::from),
            kept_here: false,
        });
    }

    /// Remembers that this host cancelled a job to replace it, with the comment that marks it so
    /// (`marked`), which Slurm keeps unless it could not be given it: the last task of an array still
    /// in the array's record can be neither updated alone nor marked once cancelled ("Job has already
    /// finished"). Such a mark is kept here for as long as Slurm lists the job, so its end is never
    /// read as the end of the pod while the pod's successor is not submitted (no node fits it, or
    /// Slurm refused it). A host restarted meanwhile reads the job as cancelled.
    pub fn record_replaced(&self, target: &str, marked: &str, marked_in_slurm: bool) {
        self.remember(Cancellation {
            target: target.to_owned(),
            admin_comment: Some(marked.into()),
            kept_here: !marked_in_slurm,
        });
    }

    fn remember(&self, cancellation: Cancellation) {
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

    /// Whether this pod may have a job no complete listing has shown: a lost submission may have made
    /// one (until a listing that began after it arrives), or the last listing cut the list of the
    /// array tasks that holds it. Submitting again could make a second job.
    pub fn in_doubt(&self, uid: &str) -> bool {
        let mut state = self.write();
        let listed_since = state.listing_began;
        state.doubts.retain(|_, at| listed_since.is_none_or(|began| began <= *at));
        state.doubts.contains_key(uid)
    }

    /// How much of `window` is left since this host queued a job for this pod, if any is.
    pub fn quiet_for(&self, uid: &str, window: Duration) -> Option<Duration> {
        left_of(&mut self.write().queued, uid, window)
    }

    /// How much of `window` is left since Slurm refused this pod's job, if any is.
    pub fn refused_for(&self, uid: &str, window: Duration) -> Option<Duration> {
        left_of(&mut self.write().refusals, uid, window)
    }

    /// A placeholder allocated as its tenant whose admin link is not written yet (Slurm restarted,
    /// or the host was stopped, in between) names its pod in its sealed comment: known by that link,
    /// whether a listing or the allocation's own answer brought it; its pass writes the link.
    fn adopt_sealed(&self, job: &mut Job) {
        if !job.admin_comment.is_empty() {
            return;
        }
        if let Some(link) = self.installation.seal().open(&job.comment, job.user_id) {
            job.admin_comment = link.into();
        }
    }

    /// Replaces the cache with a complete listing that began at `began`; returns the pods whose
    /// placeholders changed.
    fn replace(&self, mut jobs: Vec<Job>, last_update: u64, began: Instant) -> Vec<PodKey> {
        jobs.iter_mut().for_each(|job| self.adopt_sealed(job));
        // Another installation's placeholders are neither ours to bind or cancel nor candidates for
        // our preemption: its pods, PodDisruptionBudgets and grace periods are out of our sight.
        jobs.retain(|job| !self.installation.is_foreign(&job.admin_comment));
        // A hold job is no placeholder, and never a victim: pods outside Slurm use what it holds.
        let (holds, jobs): (Vec<Job>, Vec<Job>) =
            jobs.into_iter().partition(|job| super::link::held_node(&job.admin_comment).is_some());
        let holds: Vec<Job> = holds.into_iter().filter(|job| job.state() != JobState::Ended).collect();
        let mut by_pod: HashMap<String, Vec<Placeholder>> = HashMap::new();
        let holding: Vec<Job> = jobs.iter().filter(|job| job.holds_nodes()).cloned().collect();
        let (mut cut, mut hidden) = (0, Vec::new());
        for job in jobs {
            if job.array_tasks_cut() {
                cut += 1;
                let array = ArrayLink::parse(&job.admin_comment);
                hidden.extend(array.iter().flat_map(|array| array.past_the_cut(&job)).map(|pod| pod.uid.clone()));
            }
            // A gang's job is listed under every member; tasks of an array pending together, each
            // under its own pod.
            for (pod, job) in super::link::linked(&job) {
                placeholders_of(&mut by_pod, &pod.uid).push(Placeholder { pod, job });
            }
        }
        if cut > 0 {
            warn_of_cut_task_lists(cut);
        }
        let mut holding = Arc::new(holding);
        let mut state = self.write();
        // A pod whose task a cut list may hide might have a job: none is submitted for it while the
        // listings are cut (`in_doubt`), rather than a second one.
        let now = Instant::now();
        for uid in hidden.into_iter().filter(|uid| !by_pod.contains_key(uid)) {
            state.doubts.insert(uid, now);
        }
        // A submission the listing may have missed stays until a later listing includes it.
        state.submitted.retain(|(at, _)| *at >= began);
        let State { submitted, read_alone, .. } = &mut *state;
        read_alone.retain(|job_id| submitted.iter().any(|(_, placeholder)| placeholder.job.job_id == *job_id));
        for (_, placeholder) in &state.submitted {
            let jobs = placeholders_of(&mut by_pod, &placeholder.pod.uid);
            // An array's task is the same job pending with its siblings and running on its own.
            if !jobs.iter().any(|known| known.job.target() == placeholder.job.target()) {
                jobs.push(placeholder.clone());
            }
        }
        // So does a cancellation the listing may have missed.
        state
            .cancelled
            .retain(|(at, cancellation)| *at >= began || (cancellation.kept_here && at.elapsed() < MARK_KEPT_FOR));
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
        state.holds = Arc::new(holds);
        state.listed = true;
        state.listing_began = Some(began);
        if last_update > 0 {
            state.last_update = Some(last_update);
        }
        changed
    }

    /// Lists jobs once; returns the pods whose placeholders changed (see [`Self::refresh_waking`]).
    pub async fn refresh(&self, slurm: &dyn Slurm) -> Result<Vec<PodKey>, SlurmError> {
        let mut woken = Vec::new();
        let changed = self.refresh_waking(slurm, &mut |pods| woken.extend(pods)).await?;
        woken.extend(changed.into_iter().filter(|pod| !woken.contains(pod)).collect::<Vec<_>>());
        Ok(woken)
    }

    /// Lists jobs once; returns the pods whose placeholders changed, after giving `wake` those of
    /// placeholders read alone before the listing. While a submission is in doubt
    /// the listing is a full one: an incremental one may answer "unchanged" for ever (nothing else
    /// happening), and Slurm's whole-second times could hide a job made in the last listing's second.
    /// At thousands of jobs the poll asks for their states first, and lists them only when a state
    /// moved ([`job_poll`]).
    pub async fn refresh_waking(
        &self,
        slurm: &dyn Slurm,
        wake: &mut (dyn FnMut(Vec<PodKey>) + Send),
    ) -> Result<Vec<PodKey>, SlurmError> {
        let began = Instant::now();
        let (since, poll) = {
            let mut state = self.write();
            state.listing_since = Some(began);
            let pending = job_poll::Pending { doubts: !state.doubts.is_empty(), touched: !state.touched.is_empty() };
            let since = if state.doubts.is_empty() { state.last_update } else { None };
            let poll = job_poll::plan(state.full_listing.as_ref(), pending, self.states_first_from);
            (since, poll)
        };
        let listed = self.list(slurm, since, poll, began, wake).await;
        let mut state = self.write();
        state.listing_since = None;
        state.last_error = listed.as_ref().err().map(ToString::to_string);
        let (page, states) = match listed? {
            Listed::Standing => return Ok(Vec::new()),
            Listed::Page(page, states) => (page, states),
        };
        let previous = state.full_listing.map_or(0, |last| last.jobs);
        drop(state);
        let (changed, jobs) = match page {
            JobsPage::Unchanged => (Vec::new(), previous),
            JobsPage::All { jobs, last_update } => {
                let listed = jobs.len();
                (self.replace(jobs, last_update, began), listed)
            }
        };
        self.write().full_listing = Some(FullListing { began, jobs, states });
        Ok(changed)
    }

    /// The states if `poll` asks for them first, then the listing unless they show the last one stands.
    /// Placeholders the states show started are read alone in between, and their pods woken.
    async fn list(
        &self,
        slurm: &dyn Slurm,
        since: Option<u64>,
        poll: JobPoll,
        began: Instant,
        wake: &mut (dyn FnMut(Vec<PodKey>) + Send),
    ) -> Result<Listed, SlurmError> {
        let states = match poll {
            JobPoll::StatesFirst(last) => {
                let listing = slurm.job_states().await?;
                if job_poll::after_states(&last, listing.states, began) == AfterStates::Unchanged {
                    return Ok(Listed::Standing);
                }
                wake(self.read_started(slurm, &listing.running).await);
                Some(listing.states)
            }
            JobPoll::FullListing => None,
        };
        Ok(Listed::Page(slurm.jobs(since).await?, states))
    }

    /// Reads alone each pending placeholder the states list as running ([`job_poll::started`]) and
    /// records it as read; returns the pods of those that run. A read that fails leaves the rest to
    /// the full listing, which follows.
    async fn read_started(&self, slurm: &dyn Slurm, running: &HashSet<String>) -> Vec<PodKey> {
        let started = {
            let state = self.read();
            let pending = state.by_pod.values().flatten().map(|p| &p.job);
            let pending = pending.filter(|job| job.state() == JobState::Pending && job.array_tasks().is_empty());
            job_poll::started(pending.map(|job| job.job_id), running)
        };
        let mut woken = Vec::new();
        for job_id in started {
            match self.read_alone(slurm, job_id.to_string()).await {
                Ok(pods) => woken.extend(pods),
                Err(error) => {
                    tracing::debug!(job_id, %error, "reading a started placeholder failed; the listing follows");
                    break;
                }
            }
        }
        woken
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
        let began = Instant::now();
        let mut wake = |pods: Vec<PodKey>| {
            for pod in pods {
                let _ = changed.unbounded_send(ObjectRef::new(&pod.name).within(&pod.namespace));
            }
        };
        let refreshed = cache.refresh_waking(slurm.as_ref(), &mut wake).await;
        let ok = refreshed.is_ok();
        match refreshed {
            Ok(pods) => wake(pods),
            Err(error) => tracing::warn!(%error, "listing Slurm jobs failed; keeping the last known state"),
        }
        let jobs = cache.read().full_listing.map_or(0, |last| last.jobs);
        tokio::time::sleep(job_poll::rest_after(began.elapsed(), interval, jobs, cache.states_first_from, ok)).await;
    }
}

#[cfg(test)]
#[path = "job_cache_tests.rs"]
mod tests;
