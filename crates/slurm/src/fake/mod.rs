//! An in-memory Slurm for the middle tier of tests (the `fake` feature): nodes with CPUs and
//! partitions, batch jobs, immediate allocations, arrays and multi-node jobs, started by a simple
//! first-fit in priority order whenever something changes. It answers as slurmrestd does where the
//! host relies on it (a cancelled job stays listed as ended; an unknown node in a request is error
//! 2018; a refused immediate allocation leaves an ended record), and nothing more: the end-to-end suite
//! checks the real Slurm.
//!
//! Tests drive it like an administrator and a workload would: [`FakeSlurm::finish`],
//! [`FakeSlurm::set_reachable`], [`FakeSlurm::add_node`], [`FakeSlurm::forget_user`] and
//! [`FakeSlurm::release`], and read it with [`FakeSlurm::live_jobs`].

mod fit;
mod slurm_impl;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use crate::{ApiMessage, Job, JobDescription, JobState, NoValue, Node, SlurmError};

use fit::Demand;

/// A Slurm cluster in memory. Cheap to build; share it as `Arc<FakeSlurm>`.
pub struct FakeSlurm {
    world: Mutex<World>,
}

#[derive(Default)]
struct World {
    nodes: BTreeMap<String, Node>,
    jobs: BTreeMap<u32, Job>,
    /// What each job asks of the nodes it runs on.
    demands: BTreeMap<u32, Demand>,
    next_job_id: u32,
    /// Slurm's `last_update`: bumped on every change.
    changed_at: u64,
    reachable: bool,
    /// The next change finds slurmctld gone (restarting) behind a slurmrestd that answers.
    reset_next_write: bool,
    /// The next allocation is granted and killed, its answer lost.
    lose_next_allocation: bool,
    /// The next job update finds slurmctld gone (restarting).
    reset_next_job_update: bool,
    /// Job listings get no answer (the rest does).
    job_listings_unanswered: bool,
    /// Every request that changed something, as `verb target` (`cancel 12`, `drain n1`), in order.
    requests: Vec<String>,
    /// Listings answered, by call (`jobs`, `job states`, `nodes`).
    listings: BTreeMap<&'static str, usize>,
    /// Uids slurmctld resolves to no user (no passwd entry): their jobs are held when they would start.
    unknown_users: BTreeSet<u32>,
    /// What `preemption_setup` answers, when a test set it.
    preemption: Option<crate::PreemptionSetup>,
}

impl Default for FakeSlurm {
    fn default() -> Self {
        let world = World { next_job_id: 100, changed_at: 1, reachable: true, ..World::default() };
        Self { world: Mutex::new(world) }
    }
}

impl FakeSlurm {
    /// A cluster of `count` idle nodes `prefix-1..`, each with `cpus` CPUs, in partition `batch`.
    pub fn with_nodes(prefix: &str, count: usize, cpus: u64) -> Self {
        let slurm = Self::default();
        for n in 1..=count {
            slurm.add_node(&format!("{prefix}-{n}"), cpus, &["batch"]);
        }
        slurm
    }

    /// What slurmrestd says of Slurm's preemption rules from now on.
    pub fn set_preemption(&self, setup: crate::PreemptionSetup) {
        self.world.lock().expect("fake Slurm").preemption = Some(setup);
    }

    pub fn add_node(&self, name: &str, cpus: u64, partitions: &[&str]) {
        self.register(name, name, cpus, partitions);
    }

    /// A dynamic node registering, as `slurmd -Z` does, from a host named `hostname` (a slurmd pod
    /// registers with its pod's name).
    pub fn register(&self, name: &str, hostname: &str, cpus: u64, partitions: &[&str]) {
        let node = Node {
            name: name.to_owned(),
            hostname: hostname.to_owned(),
            state: vec!["IDLE".into(), "DYNAMIC_NORM".into()],
            cpus,
            real_memory: 1 << 20,
            partitions: partitions.iter().map(|p| p.to_string()).collect(),
            ..Default::default()
        };
        self.change(|world| world.nodes.insert(name.to_owned(), node));
    }

    /// Slurm answering (true) or every request failing as an unreachable slurmrestd's would.
    pub fn set_reachable(&self, reachable: bool) {
        self.world.lock().expect("fake Slurm").reachable = reachable;
    }

    /// The next request that changes something finds slurmctld restarting: slurmrestd answers with
    /// the error list 26.05's gave then (error 104, connection reset), and nothing changes.
    pub fn reset_next_write(&self) {
        self.world.lock().expect("fake Slurm").reset_next_write = true;
    }

    /// The next job update finds slurmctld restarting, as [`Self::reset_next_write`] does (the
    /// writes before it, an allocation say, go through), and from then on job listings get no answer
    /// until [`Self::answer_job_listings_again`]: slurmrestd restarting just after it answered an
    /// allocation.
    pub fn reset_next_job_update(&self) {
        self.world.lock().expect("fake Slurm").reset_next_job_update = true;
    }

    /// Full job listings get no answer (their states and single jobs do) until
    /// [`Self::answer_job_listings_again`]: a listing of thousands of jobs still in flight.
    pub fn cut_off_job_listings(&self) {
        self.world.lock().expect("fake Slurm").job_listings_unanswered = true;
    }

    /// Job listings are answered again (see [`Self::reset_next_job_update`]).
    pub fn answer_job_listings_again(&self) {
        self.world.lock().expect("fake Slurm").job_listings_unanswered = false;
    }

    /// The next allocation is granted, then killed by slurmctld because it cannot deliver the answer
    /// (`Job allocate response msg send failure`: slurmrestd restarted mid-call): the job ends FAILED
    /// on the node it was given, and the request gets no answer.
    pub fn lose_next_allocation(&self) {
        self.world.lock().expect("fake Slurm").lose_next_allocation = true;
    }

    /// The job (`12` or `10_3`) ends as its script would, with `state` (`COMPLETED`, `FAILED`...).
    pub fn finish(&self, job_id: &str, state: &str) {
        self.change(|world| {
            if let Some(id) = world.resolve(job_id) {
                world.end(id, state);
            }
        });
    }

    /// slurmctld resolves no user with `uid` (no passwd entry): a job of that user is held when it
    /// would start, as slurmctld holds a job whose credential it cannot create.
    pub fn forget_user(&self, uid: u32) {
        self.change(|world| world.unknown_users.insert(uid));
    }

    /// An administrator adds the user with `uid`: slurmctld resolves it again (its held jobs stay
    /// held until released).
    pub fn add_user(&self, uid: u32) {
        self.change(|world| world.unknown_users.remove(&uid));
    }

    /// `scontrol release`: a held job waits for nodes again.
    pub fn release(&self, job_id: &str) {
        self.change(|world| {
            let held = world.resolve(job_id).and_then(|id| world.jobs.get_mut(&id)).filter(|job| held(job));
            if let Some(job) = held {
                job.state_reason = "None".into();
                job.priority = NoValue::of(1000);
            }
        });
    }

    /// A second job just like `job_id` (its admin comment included), as a submission whose answer
    /// was lost and which was retried would leave. Its id.
    pub fn duplicate(&self, job_id: u32) -> Option<u32> {
        self.change(|world| {
            let (job, demand) = (world.jobs.get(&job_id)?.clone(), world.demands.get(&job_id)?.clone());
            let id = world.next_job_id;
            world.next_job_id += 1;
            let job = Job { job_id: id, job_state: vec!["PENDING".into()], nodes: String::new(), ..job };
            world.jobs.insert(id, job);
            world.demands.insert(id, demand);
            Some(id)
        })
    }

    /// Jobs not ended, by id.
    pub fn live_jobs(&self) -> Vec<Job> {
        let world = self.world.lock().expect("fake Slurm");
        world.jobs.values().filter(|job| job.state() != JobState::Ended).cloned().collect()
    }

    /// Every job Slurm knows, ended ones included.
    pub fn all_jobs(&self) -> Vec<Job> {
        self.world.lock().expect("fake Slurm").jobs.values().cloned().collect()
    }

    /// Every node Slurm knows.
    pub fn all_nodes(&self) -> Vec<Node> {
        self.world.lock().expect("fake Slurm").nodes.values().cloned().collect()
    }

    pub fn node(&self, name: &str) -> Option<Node> {
        self.world.lock().expect("fake Slurm").nodes.get(name).cloned()
    }

    /// Every request that changed something, as `verb target`, in order (`submit 100`, `cancel 100`,
    /// `drain n1`, `undrain n1`, `comment n1`, `delete n1`, `update 100`, `requeue 100`).
    pub fn requests(&self) -> Vec<String> {
        self.world.lock().expect("fake Slurm").requests.clone()
    }

    /// How many `call` listings (`jobs`, `job states`, `nodes`) were answered.
    pub fn listings(&self, call: &str) -> usize {
        self.world.lock().expect("fake Slurm").listings.get(call).copied().unwrap_or_default()
    }

    /// Answers a listing, counted by call, refusing as an unreachable slurmrestd would.
    fn list<T>(&self, call: &'static str, read: impl FnOnce(&World) -> T) -> Result<T, SlurmError> {
        let mut world = self.world.lock().expect("fake Slurm");
        world.answering()?;
        if call == "jobs" && world.job_listings_unanswered {
            return Err(SlurmError::NoAnswer("the fake Slurm (a job listing cut off)", std::time::Duration::ZERO));
        }
        *world.listings.entry(call).or_default() += 1;
        Ok(read(&world))
    }

    /// Answers a request that reads, refusing as an unreachable slurmrestd would.
    fn read<T>(&self, read: impl FnOnce(&World) -> T) -> Result<T, SlurmError> {
        let world = self.world.lock().expect("fake Slurm");
        world.answering()?;
        Ok(read(&world))
    }

    /// Answers a request that changes something (`request` is logged as `verb target`); the nodes'
    /// states and the pending jobs follow the change.
    fn write<T>(
        &self,
        request: String,
        change: impl FnOnce(&mut World) -> Result<T, SlurmError>,
    ) -> Result<T, SlurmError> {
        let mut world = self.world.lock().expect("fake Slurm");
        world.answering()?;
        let job_update = request.starts_with("update ") && std::mem::take(&mut world.reset_next_job_update);
        world.job_listings_unanswered |= job_update;
        if std::mem::take(&mut world.reset_next_write) || job_update {
            let reset = refusal(104, "Connection reset by peer");
            return Err(SlurmError::Api { what: "the fake slurmctld (restarting)", status: 500, errors: vec![reset] });
        }
        world.requests.push(request);
        let answer = change(&mut world);
        world.changed_at += 1;
        world.start_what_fits();
        answer
    }

    /// Changes the world as the cluster itself would (not through a request); Slurm's time moves on.
    fn change<T>(&self, change: impl FnOnce(&mut World) -> T) -> T {
        let mut world = self.world.lock().expect("fake Slurm");
        let outcome = change(&mut world);
        world.changed_at += 1;
        world.start_what_fits();
        outcome
    }
}

impl World {
    /// Whether a request gets through to slurmctld, or the error it gets instead.
    fn answering(&self) -> Result<(), SlurmError> {
        if !self.reachable {
            return Err(SlurmError::NoAnswer("the fake Slurm (unreachable)", std::time::Duration::ZERO));
        }
        Ok(())
    }

    /// The record `job_id` (`12`, or `10_3` for an array's task) names.
    fn resolve(&self, job_id: &str) -> Option<u32> {
        match job_id.split_once('_') {
            None => job_id.parse().ok().filter(|id| self.jobs.contains_key(id)),
            Some((array, task)) => {
                let (array, task) = (array.parse::<u64>().ok()?, task.parse::<u64>().ok()?);
                self.jobs
                    .values()
                    .find(|job| job.array_job_id.get() == Some(array) && job.array_task_id.get() == Some(task))
                    .map(|job| job.job_id)
            }
        }
    }

    fn end(&mut self, id: u32, state: &str) {
        if let Some(job) = self.jobs.get_mut(&id).filter(|job| job.state() != JobState::Ended) {
            job.job_state = vec![state.to_owned()];
            job.nodes.clear();
        }
    }

    /// Slurm's refusal of a request naming a node it does not know (error 2018), if it names one.
    fn unknown_node(&self, lists: &[String]) -> Option<ApiMessage> {
        let unknown = node_names(lists).into_iter().find(|name| !self.nodes.contains_key(name))?;
        Some(refusal(2018, &format!("Invalid node name specified: {unknown}")))
    }

    /// A job record for `description`, pending, with the next id.
    fn record(&mut self, description: &JobDescription, batch: bool) -> u32 {
        let id = self.next_job_id;
        self.next_job_id += 1;
        let job = Job {
            job_id: id,
            name: description.name.clone(),
            admin_comment: description.admin_comment.as_deref().unwrap_or_default().into(),
            comment: description.comment.clone().unwrap_or_default(),
            account: description.account.clone().unwrap_or_default(),
            user_name: user_name(description.user_id.as_deref()),
            user_id: description.user_id.as_deref().map_or(Some(0), |uid| uid.parse().ok()),
            job_state: vec!["PENDING".into()],
            partition: description.partition.clone().unwrap_or_else(|| "batch".into()),
            priority: description.priority.unwrap_or(NoValue::of(1000)),
            excluded_nodes: description.excluded_nodes.join(","),
            batch_flag: batch,
            requeue: batch,
            cpus: NoValue::of(u64::from(description.cpus_per_task.max(1))),
            node_count: NoValue::of(u64::from(description.minimum_nodes.unwrap_or(1))),
            ..Default::default()
        };
        self.jobs.insert(id, job);
        self.demands.insert(id, Demand::of(description));
        id
    }
}

/// The names in a request's host lists (`slurm-[1-2],gpu-1`), as slurmctld reads them; a list that
/// does not expand is kept as written, so that it is refused as an unknown node.
pub(super) fn node_names(lists: &[String]) -> Vec<String> {
    let expanded = lists.iter().filter(|list| !list.is_empty()).flat_map(|list| match crate::hostlist::expand(list) {
        Ok(names) => names,
        Err(_) => vec![list.clone()],
    });
    expanded.collect()
}

/// Whether the job waits for a release (`scontrol release`), not for nodes.
fn held(job: &Job) -> bool {
    job.state_reason.starts_with("JobHeld")
}

/// The user a job runs as, as Slurm names it: the requester's (the fake's callers sign as root)
/// unless the description names a uid; a uid this world has no name for reads as itself.
fn user_name(uid: Option<&str>) -> String {
    match uid {
        None | Some("0") => "root".into(),
        Some("65534") => "nobody".into(),
        Some(uid) => uid.into(),
    }
}

fn refusal(error_number: i64, description: &str) -> ApiMessage {
    ApiMessage { description: description.to_owned(), error_number, ..Default::default() }
}
