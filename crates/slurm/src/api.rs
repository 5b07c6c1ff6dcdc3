//! What the host asks of Slurm, as one trait: slurmrestd ([`SlurmClient`]) in production, an in-memory
//! Slurm (`FakeSlurm`, the `fake` feature) in the middle tier of tests. Controllers hold an
//! `Arc<dyn Slurm>` and never know which.
//!
//! Job ids are Slurm's names for a job: `12`, or `10_3` for task 3 of array 10 ([`Job::target`]).

use std::fmt::Display;

use async_trait::async_trait;

use super::{
    ApiVersion, Job, JobDescription, JobStatesListing, JobUpdate, JobsPage, Node, NodeUpdate, NodesPage,
    PreemptionSetup, SlurmClient, SlurmError,
};

/// A job as Slurm names it: `12`, `"12"`, or `"10_3"` for task 3 of array 10.
pub type JobId = dyn Display + Sync;

#[async_trait]
pub trait Slurm: Send + Sync {
    /// The data parser version spoken.
    fn api(&self) -> ApiVersion;
    /// Whether [`Slurm::requeue`] can work on this Slurm.
    fn can_requeue(&self) -> bool;
    /// Submits a batch job; its id.
    async fn submit(&self, job: &JobDescription) -> Result<u32, SlurmError>;
    /// Allocates nodes with no script; with `immediate`, now or never.
    async fn allocate(&self, job: &JobDescription) -> Result<u32, SlurmError>;
    /// [`Slurm::allocate`] as user `uid`, named to slurmctld by the caller's token (root or
    /// SlurmUser): the job runs as whom slurmctld resolves that name to, so the caller checks the
    /// job's ids. Such a request may not set an administrator's field (`admin_comment`).
    async fn allocate_as(&self, job: &JobDescription, uid: u32) -> Result<u32, SlurmError>;
    /// One job, if Slurm knows it.
    async fn job(&self, job_id: &JobId) -> Result<Option<Job>, SlurmError>;
    /// Every record of a job: its own, or every record of its array. None if Slurm does not know it.
    async fn job_records(&self, job_id: &JobId) -> Result<Vec<Job>, SlurmError>;
    /// Cancels a job; one that already ended is not an error.
    async fn cancel(&self, job_id: &JobId) -> Result<(), SlurmError>;
    /// Ends a batch job where it runs and queues it again.
    async fn requeue(&self, job_id: &JobId) -> Result<(), SlurmError>;
    /// Cancels several jobs at once; those Slurm did not cancel, each with why.
    async fn cancel_jobs(&self, job_ids: &[String]) -> Result<Vec<(String, String)>, SlurmError>;
    async fn update_job(&self, job_id: &JobId, update: &JobUpdate) -> Result<(), SlurmError>;
    /// Every job, or "unchanged since `since`".
    async fn jobs(&self, since: Option<u64>) -> Result<JobsPage, SlurmError>;
    /// Every job's state, as a fingerprint: far cheaper than [`Slurm::jobs`] at thousands of jobs.
    async fn job_states(&self) -> Result<JobStatesListing, SlurmError>;
    /// Every node, or "unchanged since `since`".
    async fn nodes(&self, since: Option<u64>) -> Result<NodesPage, SlurmError>;
    /// One node as Slurm has it now, if it knows it: one small request, not a listing.
    async fn node(&self, name: &str) -> Result<Option<Node>, SlurmError>;
    async fn update_node(&self, name: &str, update: &NodeUpdate) -> Result<(), SlurmError>;
    /// Deletes a dynamic node; one already gone is not an error.
    async fn delete_node(&self, name: &str) -> Result<(), SlurmError>;
    /// What Slurm's own preemption rules are made of, as far as slurmrestd can say.
    async fn preemption_setup(&self) -> Result<PreemptionSetup, SlurmError>;
}

#[async_trait]
impl Slurm for SlurmClient {
    fn api(&self) -> ApiVersion {
        SlurmClient::api(self)
    }
    fn can_requeue(&self) -> bool {
        SlurmClient::can_requeue(self)
    }
    async fn submit(&self, job: &JobDescription) -> Result<u32, SlurmError> {
        SlurmClient::submit(self, job).await
    }
    async fn allocate(&self, job: &JobDescription) -> Result<u32, SlurmError> {
        SlurmClient::allocate(self, job).await
    }
    async fn allocate_as(&self, job: &JobDescription, uid: u32) -> Result<u32, SlurmError> {
        SlurmClient::allocate_as(self, job, uid).await
    }
    async fn job(&self, job_id: &JobId) -> Result<Option<Job>, SlurmError> {
        SlurmClient::job(self, job_id).await
    }
    async fn job_records(&self, job_id: &JobId) -> Result<Vec<Job>, SlurmError> {
        SlurmClient::job_records(self, job_id).await
    }
    async fn cancel(&self, job_id: &JobId) -> Result<(), SlurmError> {
        SlurmClient::cancel(self, job_id).await
    }
    async fn requeue(&self, job_id: &JobId) -> Result<(), SlurmError> {
        SlurmClient::requeue(self, job_id).await
    }
    async fn cancel_jobs(&self, job_ids: &[String]) -> Result<Vec<(String, String)>, SlurmError> {
        SlurmClient::cancel_jobs(self, job_ids).await
    }
    async fn update_job(&self, job_id: &JobId, update: &JobUpdate) -> Result<(), SlurmError> {
        SlurmClient::update_job(self, job_id, update).await
    }
    async fn jobs(&self, since: Option<u64>) -> Result<JobsPage, SlurmError> {
        SlurmClient::jobs(self, since).await
    }
    async fn job_states(&self) -> Result<JobStatesListing, SlurmError> {
        SlurmClient::job_states(self).await
    }
    async fn nodes(&self, since: Option<u64>) -> Result<NodesPage, SlurmError> {
        SlurmClient::nodes(self, since).await
    }
    async fn node(&self, name: &str) -> Result<Option<Node>, SlurmError> {
        SlurmClient::node(self, name).await
    }
    async fn update_node(&self, name: &str, update: &NodeUpdate) -> Result<(), SlurmError> {
        SlurmClient::update_node(self, name, update).await
    }
    async fn delete_node(&self, name: &str) -> Result<(), SlurmError> {
        SlurmClient::delete_node(self, name).await
    }
    async fn preemption_setup(&self) -> Result<PreemptionSetup, SlurmError> {
        SlurmClient::preemption_setup(self).await
    }
}
