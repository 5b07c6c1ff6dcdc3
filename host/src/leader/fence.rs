//! Fenced writes: with leader election, this process may write only until its claim on the Lease is
//! about to run out (`STOP_BEFORE_EXPIRY` before a follower may take it). The leadership moves the
//! fence forward at every renewal and closes it when it is lost; every write to Kubernetes
//! ([`layer`], on the writers' client) and to Slurm ([`FencedSlurm`]) checks it first, so a leader
//! paused past its Lease (a stalled node, a throttled container) writes nothing when it wakes.
//! Without leader election the fence is always open.

use std::sync::{Arc, Mutex, PoisonError};

use ::http::{Method, Request};
use async_trait::async_trait;
use tokio::time::Instant;

use crate::slurm::{
    ApiVersion, Job, JobDescription, JobId, JobStatesListing, JobUpdate, JobsPage, Node, NodeUpdate, NodesPage,
    PreemptionSetup, Slurm, SlurmError,
};

const CLOSED: &str = "this host no longer holds the leader Lease";

#[derive(Clone)]
pub struct Fence(Arc<Mutex<Gate>>);

#[derive(Clone, Copy, Debug, PartialEq)]
enum Gate {
    Always,
    Until(Instant),
    Closed,
}

impl Fence {
    /// The fence of a host without leader election: always open.
    pub fn open() -> Self {
        Self(Arc::new(Mutex::new(Gate::Always)))
    }

    /// The fence of a candidate: closed until it leads.
    pub fn closed() -> Self {
        Self(Arc::new(Mutex::new(Gate::Closed)))
    }

    /// Writes may go until `deadline`.
    pub fn open_until(&self, deadline: Instant) {
        let mut gate = self.lock();
        if *gate != Gate::Always {
            *gate = Gate::Until(deadline);
        }
    }

    pub fn close(&self) {
        let mut gate = self.lock();
        if *gate != Gate::Always {
            *gate = Gate::Closed;
        }
    }

    /// Whether a write may go now.
    pub fn is_open(&self) -> bool {
        match *self.lock() {
            Gate::Always => true,
            Gate::Until(deadline) => Instant::now() < deadline,
            Gate::Closed => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Gate> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Why a write was kept back.
#[derive(Debug, thiserror::Error)]
#[error("write not sent: {CLOSED}")]
pub struct Fenced;

/// A tower layer for the writers' Kubernetes client: every request but a read is refused while the
/// fence is closed.
pub fn layer(
    fence: Fence,
) -> tower::filter::FilterLayer<
    impl Fn(Request<kube::client::Body>) -> Result<Request<kube::client::Body>, Fenced> + Clone,
> {
    tower::filter::FilterLayer::new(move |request: Request<kube::client::Body>| {
        let reads = matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS);
        if reads || fence.is_open() { Ok(request) } else { Err(Fenced) }
    })
}

/// The writers' Slurm: reads go through; a write goes only while the fence is open.
pub struct FencedSlurm {
    slurm: Arc<dyn Slurm>,
    fence: Fence,
}

impl FencedSlurm {
    pub fn new(slurm: Arc<dyn Slurm>, fence: Fence) -> Self {
        Self { slurm, fence }
    }

    fn may_write(&self) -> Result<&dyn Slurm, SlurmError> {
        if self.fence.is_open() { Ok(self.slurm.as_ref()) } else { Err(SlurmError::Withheld(CLOSED)) }
    }
}

#[async_trait]
impl Slurm for FencedSlurm {
    fn api(&self) -> ApiVersion {
        self.slurm.api()
    }
    fn can_requeue(&self) -> bool {
        self.slurm.can_requeue()
    }
    async fn submit(&self, job: &JobDescription) -> Result<u32, SlurmError> {
        self.may_write()?.submit(job).await
    }
    async fn allocate(&self, job: &JobDescription) -> Result<u32, SlurmError> {
        self.may_write()?.allocate(job).await
    }
    async fn allocate_as(&self, job: &JobDescription, uid: u32) -> Result<u32, SlurmError> {
        self.may_write()?.allocate_as(job, uid).await
    }
    async fn job(&self, job_id: &JobId) -> Result<Option<Job>, SlurmError> {
        self.slurm.job(job_id).await
    }
    async fn job_records(&self, job_id: &JobId) -> Result<Vec<Job>, SlurmError> {
        self.slurm.job_records(job_id).await
    }
    async fn cancel(&self, job_id: &JobId) -> Result<(), SlurmError> {
        self.may_write()?.cancel(job_id).await
    }
    async fn requeue(&self, job_id: &JobId) -> Result<(), SlurmError> {
        self.may_write()?.requeue(job_id).await
    }
    async fn cancel_jobs(&self, job_ids: &[String]) -> Result<Vec<(String, String)>, SlurmError> {
        self.may_write()?.cancel_jobs(job_ids).await
    }
    async fn update_job(&self, job_id: &JobId, update: &JobUpdate) -> Result<(), SlurmError> {
        self.may_write()?.update_job(job_id, update).await
    }
    async fn jobs(&self, since: Option<u64>) -> Result<JobsPage, SlurmError> {
        self.slurm.jobs(since).await
    }
    async fn job_states(&self) -> Result<JobStatesListing, SlurmError> {
        self.slurm.job_states().await
    }
    async fn nodes(&self, since: Option<u64>) -> Result<NodesPage, SlurmError> {
        self.slurm.nodes(since).await
    }
    async fn node(&self, name: &str) -> Result<Option<Node>, SlurmError> {
        self.slurm.node(name).await
    }
    async fn update_node(&self, name: &str, update: &NodeUpdate) -> Result<(), SlurmError> {
        self.may_write()?.update_node(name, update).await
    }
    async fn delete_node(&self, name: &str) -> Result<(), SlurmError> {
        self.may_write()?.delete_node(name).await
    }
    async fn preemption_setup(&self) -> Result<PreemptionSetup, SlurmError> {
        self.slurm.preemption_setup().await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::slurm::FakeSlurm;

    #[tokio::test]
    async fn writes_go_only_while_the_fence_is_open_and_reads_always() {
        let fence = Fence::closed();
        let slurm = FencedSlurm::new(Arc::new(FakeSlurm::with_nodes("n", 1, 2)), fence.clone());
        let job = JobDescription { name: "a".into(), ..Default::default() };
        assert!(matches!(slurm.submit(&job).await, Err(SlurmError::Withheld(_))), "a candidate writes nothing");
        assert!(slurm.jobs(None).await.is_ok(), "but reads");

        fence.open_until(Instant::now() + Duration::from_secs(60));
        assert!(slurm.submit(&job).await.is_ok(), "a leader writes");

        fence.open_until(Instant::now());
        assert!(slurm.cancel(&"100").await.is_err(), "not past its claim's deadline");
        fence.open_until(Instant::now() + Duration::from_secs(60));
        fence.close();
        assert!(!fence.is_open(), "nor once it lost the Lease");
    }

    #[test]
    fn without_leader_election_the_fence_never_closes() {
        let fence = Fence::open();
        fence.close();
        fence.open_until(Instant::now());
        assert!(fence.is_open());
    }
}
