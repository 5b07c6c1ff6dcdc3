//! How long the scheduler waits before it looks at a pod again, and how long it gives Slurm, a job
//! or a pod before it acts on what has not happened yet, in one place: each step returns one of these
//! with its decision instead of choosing a number of its own.
//!
//! Not here: how often Slurm is polled (`job_poll`, `preemption::known_rules`) and how long a memory
//! keeps an entry before forgetting it (`placement_checks`, `preemption::in_flight`): each is part of
//! what its module does, and tested there.

use std::time::Duration;

// Looking at a pod again.

/// A second look when nothing is expected to change the pod sooner (a watch event, a change of
/// Slurm's jobs or nodes, or another member of its group brings it back earlier).
pub const RECHECK: Duration = Duration::from_secs(60);
/// A pod whose job was just queued says what the job waits for once this has passed, unless the job
/// started first; its pass then reads the job alone if no listing showed it yet. slurmctld starts a
/// queued job at its next scheduling pass, on the next whole second.
pub const SUBMITTED_RECHECK: Duration = Duration::from_secs(1);
/// Soon again, after something that should pass (a conflict, a job not listed yet, Slurm busy).
pub const RETRY: Duration = Duration::from_secs(5);
/// Before the first job listing, "no job" is not known to be true; that listing is a poll away.
pub const FIRST_LISTING_RECHECK: Duration = Duration::from_millis(500);
/// Slurm's nodes could not be read: usually a moment (the first listing after a start, one failed
/// poll), so soon again.
pub const UNREADABLE_RECHECK: Duration = Duration::from_millis(500);
/// A leaving pod's containers may still hold its Node; a kubelet reports them stopped within seconds.
pub const CONTAINERS_STOPPED_RECHECK: Duration = Duration::from_secs(1);
/// A pod waiting for a leaving pod's room on its Node: a pod leaves within seconds.
pub const ROOM_RECHECK: Duration = Duration::from_secs(1);
/// A placeholder Slurm requeued whose preemptor has not started yet: it starts within moments.
pub const PREEMPTOR_RECHECK: Duration = Duration::from_secs(1);

/// Until the controller's store of pods is listed, the orphan sweep looks again this often: its
/// readiness wakes only the latest waiter, and the controller waits on it too.
pub const STORE_READY_RECHECK: Duration = Duration::from_secs(1);

// Patience: how long something may not happen before the scheduler acts on it.

/// How long a job listing may go unanswered before waiting pods say Slurm cannot be reached.
pub const SLURM_PATIENCE: Duration = Duration::from_secs(10);
/// How long a job listing may go unanswered before nothing is preempted on it: a decision on a stale
/// view could kill a job that has already gone or moved.
pub const PREEMPTION_PATIENCE: Duration = Duration::from_secs(10);
/// How long after Slurm's own preemption the preemptor may take to start (it starts a moment after
/// its victim is gone), before the pod's Event says Slurm does not name it.
pub const PREEMPTOR_PATIENCE: Duration = Duration::from_secs(5);
/// How long after its placeholder started a pod waits for a leaving pod at most: a pod that never
/// leaves (its kubelet gone) must not hold the job's node idle; the kubelet then decides.
pub const ROOM_WAIT_LIMIT: Duration = Duration::from_secs(60);
/// How long a running job may hold a Slurm node no slurmd pod is known to host before it is
/// replaced. A slurmd pod just made is seen within moments. One deleted under a job whose pod was not
/// bound yet leaves that pod nowhere to go, and the node held for good: the NodeSet makes no new slurmd
/// pod for a node a job still holds.
pub const UNHOSTED_PATIENCE: Duration = Duration::from_secs(30);
/// How long after its victims are gone a waiting job is left to Slurm before it may preempt again.
pub const PREEMPTION_SETTLE: Duration = Duration::from_secs(10);
/// How long a turn of job-array submission keeps the pods that arrive waiting, at most: a submission
/// that meets one of slurmctld 24.11's 5 s connection stalls must not hold up a whole burst behind it.
pub const LONGEST_TURN: Duration = Duration::from_millis(250);
/// How long after a job array went a burst is taken to be on: a pod alone in its turn then is queued
/// with the burst instead of trying the fast path (see `batch::Batches::in_burst`).
pub const BURST_LINGERS: Duration = Duration::from_secs(1);
/// How long a pod this host bound counts as bound before the pod watch shows it (the watch takes
/// well under a second; a binding the API server never took is forgotten at once).
pub const ASSUMED_FOR: Duration = Duration::from_secs(30);
/// How long past its grace period a deleted pod may keep its allocation (a kubelet that never reports
/// its containers stopped must not hold a Slurm node for ever).
pub const STOP_GRACE: Duration = Duration::from_secs(30);
