//! HTTP calls to slurmrestd. Every call checks the body's `errors`, not only the HTTP status:
//! slurmrestd answers 200 to a submission it ignored.

use std::fmt::Display;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde::Serialize;

use super::decode::{decode, decode_listing};
use super::job_states::{JobStatesListing, JobStatesResponse};
use super::model::{CancelJobsResponse, Envelope, JobsResponse, PingResponse, SubmitResponse};
use super::node::NodesResponse;
use super::preemption::{ConfResponse, PartitionsResponse, QosResponse};
use super::version::{self, ApiVersion, OpenApiPaths, SlurmInfo};
use super::{Job, JobDescription, JobUpdate, Node, NodeUpdate, PreemptionSetup, SlurmError, TokenSigner};
/// slurmrestd caps its connections (124 by default, idle keep-alive ones included).
const MAX_IDLE_CONNECTIONS: usize = 8;

/// How long a submission may take, the wait for a request slot included: a hung slurmrestd must not
/// hold a pod's pass (and so its condition) for the whole request timeout, twice over behind the
/// listings that hold the slots.
pub const SUBMIT_DEADLINE: Duration = Duration::from_secs(10);

/// How long a request may take once sent, its answer's body included.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Requests in flight at once unless told otherwise (`with_max_in_flight`).
pub const DEFAULT_MAX_IN_FLIGHT: usize = 2;

/// Seconds: from the 5 ms a drain takes on an idle slurmctld to the request timeout.
const SECONDS_BUCKETS: [f64; 12] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

type Timings = Family<CallLabels, Histogram, fn() -> Histogram>;

/// A cheaply cloned handle on one slurmrestd.
#[derive(Clone)]
pub struct SlurmClient {
    http: reqwest::Client,
    base: String,
    signer: Arc<TokenSigner>,
    /// Every request passes through here: slurmrestd opens a new slurmctld connection per request,
    /// and slurmctld 24.11.5 sometimes leaves a new connection unaccepted for 5 s, the more often the
    /// more connections overlap (docs/benchmarks.md, "slurmctld 24.11's connection stalls"). Waiting here costs
    /// milliseconds; a stall costs everyone 5 s.
    in_flight: Arc<tokio::sync::Semaphore>,
    /// Listings take one of these before a slot, so with two slots or more one slot is always left
    /// to writes: a drain must not wait behind a listing of 10,000 jobs.
    listings: Arc<tokio::sync::Semaphore>,
    /// Node listings have a lane of their own, beside the slots: every decision rests on the node
    /// view, which goes stale 7 s after its last listing was asked for, and a listing of 10,000 jobs
    /// holds a listing slot for seconds.
    node_listings: Arc<tokio::sync::Semaphore>,
    /// What requests speak: v0.0.42 without requeue until [`SlurmClient::discover`] chooses.
    spoken: Arc<ArcSwap<Spoken>>,
    /// Requests sent, by call: what "one Slurm request per poll" is measured by.
    sent: Family<CallLabels, Counter>,
    /// How long requests waited for a slot, and then for slurmrestd's answer (its headers), by call.
    waited: Timings,
    answered: Timings,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    /// The call, as errors name it: `jobs`, `nodes`, `job/submit`, `job update`, ...
    call: &'static str,
}

/// The data parser version requests go to, and whether slurmrestd can requeue a job.
#[derive(Debug, Clone, Copy)]
struct Spoken {
    api: ApiVersion,
    requeue: bool,
}

/// One answer to an incremental job listing.
#[derive(Debug)]
pub enum JobsPage {
    /// Nothing changed since the time asked about.
    Unchanged,
    /// Every job Slurm knows, and the time of the last change to pass next time.
    All { jobs: Vec<Job>, last_update: u64 },
}

/// One answer to an incremental node listing.
#[derive(Debug, Clone, PartialEq)]
pub enum NodesPage {
    /// Nothing changed since the time asked about (HTTP 304).
    Unchanged,
    /// Every node Slurm knows, and the time of the last change to pass next time (never 0).
    All { nodes: Vec<Node>, last_update: Option<u64> },
}

#[derive(Serialize)]
struct Submit<'a> {
    job: &'a JobDescription,
}

#[derive(Serialize)]
struct CancelJobs {
    jobs: Vec<String>,
}

impl SlurmClient {
    pub fn new(base_url: &str, signer: TokenSigner) -> Result<Self, SlurmError> {
        // Every request carries a token of the host's Slurm user, in a header that reqwest keeps on a
        // redirect to another host (it strips only `Authorization` and cookies): the token goes to
        // slurmrestd's URL and nowhere else, so no redirect is followed (a 3xx is an error) and no
        // proxy that HTTP_PROXY, HTTPS_PROXY or ALL_PROXY name is used.
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .pool_max_idle_per_host(MAX_IDLE_CONNECTIONS)
            .connect_timeout(Duration::from_secs(5))
            .timeout(REQUEST_TIMEOUT)
            .build()?;
        Ok(Self {
            http,
            base: base_url.trim_end_matches('/').to_string(),
            signer: Arc::new(signer),
            in_flight: Arc::new(tokio::sync::Semaphore::new(DEFAULT_MAX_IN_FLIGHT)),
            listings: Arc::new(tokio::sync::Semaphore::new(listing_slots(DEFAULT_MAX_IN_FLIGHT))),
            node_listings: Arc::new(tokio::sync::Semaphore::new(1)),
            spoken: Arc::new(ArcSwap::from_pointee(Spoken { api: ApiVersion::V0_0_42, requeue: false })),
            sent: Family::default(),
            waited: Timings::new_with_constructor(seconds),
            answered: Timings::new_with_constructor(seconds),
        })
    }

    /// Adds `sunk_slurm_requests_total{call}` to `registry`: every request sent to slurmrestd; and
    /// `sunk_slurm_request_wait_seconds{call}` and `sunk_slurm_request_seconds{call}`: how long each
    /// waited for a slot, and then for its answer.
    pub fn register(&self, registry: &mut Registry) {
        registry.register("sunk_slurm_requests", "Requests sent to slurmrestd, by call", self.sent.clone());
        registry.register(
            "sunk_slurm_request_wait_seconds",
            "Time a request to slurmrestd waited for a free request slot, by call",
            self.waited.clone(),
        );
        registry.register(
            "sunk_slurm_request_seconds",
            "Time from sending a request to slurmrestd to its answer's headers, by call",
            self.answered.clone(),
        );
    }

    /// The same slurmrestd with at most `requests` requests in flight at once (at least one), of
    /// which listings may take all but one, besides one node listing.
    pub fn with_max_in_flight(self, requests: usize) -> Self {
        let requests = requests.max(1);
        Self {
            in_flight: Arc::new(tokio::sync::Semaphore::new(requests)),
            listings: Arc::new(tokio::sync::Semaphore::new(listing_slots(requests))),
            ..self
        }
    }

    /// Sends a request once a slot in its `lane` is free (the wait is not part of the request's
    /// timeout), with a token taken only then: however long the wait, the request leaves with all the
    /// time [`TokenSigner`] leaves a token it hands out.
    async fn send(&self, call: &'static str, lane: Lane, request: RequestBuilder) -> Result<Response, SlurmError> {
        let labels = CallLabels { call };
        let asked = Instant::now();
        let (_listing, _slot) = match lane {
            Lane::NodeListing => (None, permit(&self.node_listings).await),
            Lane::Listing => (Some(permit(&self.listings).await), permit(&self.in_flight).await),
            Lane::Other => (None, permit(&self.in_flight).await),
        };
        let request = request.header("X-SLURM-USER-TOKEN", self.signer.token()?);
        let sent = Instant::now();
        self.waited.get_or_create(&labels).observe(sent.duration_since(asked).as_secs_f64());
        self.sent.get_or_create(&labels).inc();
        let response = request.send().await;
        self.answered.get_or_create(&labels).observe(sent.elapsed().as_secs_f64());
        Ok(response?)
    }

    /// A request to `path` of the data parser spoken, without its token ([`SlurmClient::send`] adds it).
    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.request_to(method, &format!("slurm/{}/{path}", self.api()))
    }

    fn request_to(&self, method: Method, path: &str) -> RequestBuilder {
        self.http.request(method, format!("{}/{path}", self.base))
    }

    /// The data parser version requests go to.
    pub fn api(&self) -> ApiVersion {
        self.spoken.load().api
    }

    /// Whether slurmrestd can requeue a job ([`SlurmClient::requeue`]).
    pub fn can_requeue(&self) -> bool {
        self.spoken.load().requeue
    }

    pub async fn ping(&self) -> Result<(), SlurmError> {
        self.ping_release().await.map(drop)
    }

    /// Pings slurmctld through slurmrestd; returns the Slurm release that answered.
    async fn ping_release(&self) -> Result<String, SlurmError> {
        let response = self.send("ping", Lane::Other, self.request(Method::GET, "ping")).await?;
        let answer = decode::<PingResponse>("ping", response).await?;
        if !answer.pings.iter().any(|ping| ping.responding) {
            return Err(SlurmError::Api {
                what: "ping",
                status: 200,
                errors: vec![super::ApiMessage {
                    description: "no slurmctld responded (slurmctld down, or the token refused)".into(),
                    ..Default::default()
                }],
            });
        }
        Ok(answer.meta.release())
    }

    /// Asks slurmrestd which data parser versions it serves (its OpenAPI document), speaks the newest
    /// of [`version::SPEAKS`] among them from now on (every clone of this client does), and pings
    /// through it. Fails, naming both lists, when none is offered; the version spoken is then left
    /// as it was.
    pub async fn discover(&self) -> Result<SlurmInfo, SlurmError> {
        let response = self.send("openapi/v3", Lane::Other, self.request_to(Method::GET, "openapi/v3")).await?;
        let offered = decode::<OpenApiPaths>("openapi/v3", response).await?.slurm_versions();
        let api = version::choose(version::SPEAKS, &offered)?;
        let requeue = offered.contains(&ApiVersion::V0_0_45);
        self.spoken.store(Arc::new(Spoken { api, requeue }));
        let release = self.ping_release().await?;
        Ok(SlurmInfo { release, api, offered })
    }

    /// Submits a batch job and returns its id (within [`SUBMIT_DEADLINE`], or [`SlurmError::NoAnswer`]).
    pub async fn submit(&self, job: &JobDescription) -> Result<u32, SlurmError> {
        let answer = self.post_job("job/submit", job, None).await?;
        match answer.job_id {
            Some(id) if answer.envelope.errors.is_empty() => Ok(id),
            _ => Err(not_submitted(answer)),
        }
    }

    /// Allocates nodes for a job with no script (`salloc`); with `immediate` it starts now or fails.
    /// Within [`SUBMIT_DEADLINE`], or [`SlurmError::NoAnswer`].
    pub async fn allocate(&self, job: &JobDescription) -> Result<u32, SlurmError> {
        allocated(self.post_job("job/allocate", job, None).await?)
    }

    /// [`SlurmClient::allocate`] as user `uid`: slurmrestd passes the name on with the token, and
    /// slurmctld takes it from root or SlurmUser (`auth/jwt`). A numeric name is taken as that uid
    /// where the uid resolves; one that does not resolve runs as slurmctld's nobody (99) instead, so
    /// the caller checks the job's ids.
    pub async fn allocate_as(&self, job: &JobDescription, uid: u32) -> Result<u32, SlurmError> {
        allocated(self.post_job("job/allocate", job, Some(uid)).await?)
    }

    /// POSTs a job description to `what` (`job/submit`, `job/allocate`), as user `uid` if named, and
    /// decodes the answer, all within [`SUBMIT_DEADLINE`].
    async fn post_job(
        &self,
        what: &'static str,
        job: &JobDescription,
        uid: Option<u32>,
    ) -> Result<SubmitResponse, SlurmError> {
        let mut request = self.request(Method::POST, what).json(&Submit { job });
        if let Some(uid) = uid {
            request = request.header("X-SLURM-USER-NAME", uid.to_string());
        }
        let posted = async {
            let response = self.send(what, Lane::Other, request).await?;
            decode(what, response).await
        };
        tokio::time::timeout(SUBMIT_DEADLINE, posted).await.map_err(|_| SlurmError::NoAnswer(what, SUBMIT_DEADLINE))?
    }

    /// One job as Slurm lists it, if it knows it. For an array task (`10_3`) Slurm lists every
    /// record of the array: the task's own is the one returned.
    pub async fn job(&self, job_id: impl Display) -> Result<Option<Job>, SlurmError> {
        let wanted = job_id.to_string();
        let mut jobs = self.job_records(&wanted).await?;
        let own = jobs.iter().position(|job| job.target() == wanted || job.job_id.to_string() == wanted);
        // A task still pending with its siblings has no record of its own: theirs stands for it.
        let pending_with_siblings = || {
            let (array, task) = wanted.split_once('_')?;
            let (array, task) = (array.parse::<u64>().ok()?, task.parse::<u32>().ok()?);
            jobs.iter().position(|job| job.array_job_id.get() == Some(array) && job.array_tasks().contains(&task))
        };
        let own = own.or_else(pending_with_siblings);
        Ok((!jobs.is_empty()).then(|| jobs.swap_remove(own.unwrap_or(0))))
    }

    /// Every record Slurm lists for a job (`GET job/<id>`): the job's own, or for an array or any of
    /// its tasks (`10_3`), every record of the array (its started tasks and its pending remainder).
    /// None if Slurm does not know it.
    pub async fn job_records(&self, job_id: impl Display) -> Result<Vec<Job>, SlurmError> {
        let response = self.send("job", Lane::Other, self.request(Method::GET, &format!("job/{job_id}"))).await?;
        match decode::<JobsResponse>("job", response).await {
            Ok(answer) => Ok(answer.jobs),
            Err(SlurmError::Api { status: 404, .. }) => Ok(Vec::new()),
            Err(error) => Err(error),
        }
    }

    /// Cancels a job (SIGKILL after KillWait, as scancel), `12` or an array's task `10_3`. A job that
    /// already ended is not an error.
    pub async fn cancel(&self, job_id: impl Display) -> Result<(), SlurmError> {
        let response =
            self.send("job cancel", Lane::Other, self.request(Method::DELETE, &format!("job/{job_id}"))).await?;
        match decode::<Envelope>("job cancel", response).await {
            Err(SlurmError::Api { status: 404, .. }) => Ok(()),
            Err(SlurmError::Api { errors, .. }) if errors.iter().all(already_over) => Ok(()),
            other => other.map(drop),
        }
    }

    /// Requeues a batch job, as `scontrol requeue`: it ends where it runs and waits in the queue to
    /// start again from its beginning. Only slurmrestd's v0.0.45 and later can ([`Self::can_requeue`]);
    /// Slurm refuses a job that is no batch job or may not be requeued.
    pub async fn requeue(&self, job_id: impl Display) -> Result<(), SlurmError> {
        if !self.can_requeue() {
            return Err(SlurmError::Unsupported("requeueing a job (slurmrestd's v0.0.45, Slurm 26.05 and later)"));
        }
        let path = format!("slurm/{}/job/{job_id}/requeue", ApiVersion::V0_0_45);
        let response = self.send("job requeue", Lane::Other, self.request_to(Method::GET, &path)).await?;
        decode::<Envelope>("job requeue", response).await.map(drop)
    }

    /// Cancels several jobs in one request (`DELETE jobs`, as `scancel 1 2 3`): one slurmctld RPC
    /// however many jobs. Returns the jobs Slurm did not cancel, each with why; a job that already
    /// ended or is unknown is not among them.
    pub async fn cancel_jobs<T: Display>(&self, job_ids: &[T]) -> Result<Vec<(String, String)>, SlurmError> {
        // Without a job list the request selects every job the token's user may signal: never sent.
        if job_ids.is_empty() {
            return Ok(Vec::new());
        }
        let body = CancelJobs { jobs: job_ids.iter().map(ToString::to_string).collect() };
        let response = self.send("jobs cancel", Lane::Other, self.request(Method::DELETE, "jobs").json(&body)).await?;
        let answer: CancelJobsResponse = decode("jobs cancel", response).await?;
        Ok(answer
            .status
            .into_iter()
            .filter(|failed| !is_over(failed.error.code))
            .map(|failed| (failed.step_id, failed.error.message))
            .collect())
    }

    /// Changes a job (an administrator may change a running job's admin comment, and a pending job's
    /// placement limits).
    pub async fn update_job(&self, job_id: impl Display, update: &JobUpdate) -> Result<(), SlurmError> {
        let response = self
            .send("job update", Lane::Other, self.request(Method::POST, &format!("job/{job_id}")).json(update))
            .await?;
        decode::<Envelope>("job update", response).await.map(drop)
    }

    /// Lists every job, or says nothing changed since `since` (a previous `last_update`).
    pub async fn jobs(&self, since: Option<u64>) -> Result<JobsPage, SlurmError> {
        // Any `flags` replaces slurmrestd's default, which adds `SHOW_DETAIL`: every job's
        // `job_resources`, a record per core of each node it holds (ended jobs included, for MinJobAge),
        // which nothing here reads. Without it a listing is a third the size.
        let mut request = self.request(Method::GET, "jobs").query(&[("flags", "ALL")]);
        if let Some(since) = since {
            request = request.query(&[("update_time", since)]);
        }
        let answer: JobsResponse = decode_listing("jobs", self.send("jobs", Lane::Listing, request).await?).await?;
        // With update_time, "nothing changed" comes back as no jobs and a zero last_update.
        match answer.last_update.get() {
            Some(last_update) if last_update > 0 => Ok(JobsPage::All { jobs: answer.jobs, last_update }),
            _ if since.is_some() && answer.jobs.is_empty() => Ok(JobsPage::Unchanged),
            _ => Ok(JobsPage::All { jobs: answer.jobs, last_update: since.unwrap_or(0) }),
        }
    }

    /// Every job's state, as a fingerprint, and the jobs that run ([`JobStatesListing`]).
    pub async fn job_states(&self) -> Result<JobStatesListing, SlurmError> {
        let request = self.request(Method::GET, "jobs/state/");
        let answer: JobStatesResponse =
            decode_listing("job states", self.send("job states", Lane::Listing, request).await?).await?;
        Ok(answer.listing())
    }

    /// The names of the cluster's partitions.
    pub async fn partitions(&self) -> Result<Vec<String>, SlurmError> {
        let answer: PartitionsResponse = decode(
            "partitions",
            self.send("partitions", Lane::Listing, self.request(Method::GET, "partitions")).await?,
        )
        .await?;
        Ok(answer.partitions.into_iter().map(|partition| partition.name).collect())
    }

    /// What slurmrestd can say of Slurm's preemption rules: slurm.conf's preemption lines (26.05's
    /// v0.0.45 only), every partition (through v0.0.45 where served, the first parser that lists a
    /// partition's PreemptMode) and every QOS (where slurmrestd serves accounting). Three requests:
    /// for a caller that reads them now and then, not per decision.
    pub async fn preemption_setup(&self) -> Result<PreemptionSetup, SlurmError> {
        let newest = if self.can_requeue() { ApiVersion::V0_0_45 } else { self.api() };
        let conf = match newest >= ApiVersion::V0_0_45 {
            true => {
                let path = format!("slurm/{newest}/conf");
                let answer: ConfResponse =
                    decode("conf", self.send("conf", Lane::Other, self.request_to(Method::GET, &path)).await?).await?;
                Some(answer.slurm_conf)
            }
            false => None,
        };
        let path = format!("slurm/{newest}/partitions");
        let partitions: PartitionsResponse =
            decode("partitions", self.send("partitions", Lane::Listing, self.request_to(Method::GET, &path)).await?)
                .await?;
        let path = format!("slurmdb/{}/qos", self.api());
        let qos = match decode::<QosResponse>(
            "qos",
            self.send("qos", Lane::Listing, self.request_to(Method::GET, &path)).await?,
        )
        .await
        {
            Ok(answer) => Some(answer.qos),
            // No openapi/slurmdbd plugin in this slurmrestd: it serves no accounting path at all.
            Err(SlurmError::Api { status: 404, .. }) => None,
            Err(error) => return Err(error),
        };
        Ok(PreemptionSetup { conf, partitions: partitions.partitions, qos })
    }

    /// Lists every node, or says nothing changed since `since` (a previous `last_update`).
    ///
    /// slurmrestd 24.11 answers HTTP 500 "Unable to query partitions" to an incremental listing when
    /// nodes changed but partitions did not ([`SlurmError::is_partitions_unchanged`]): the caller
    /// then asks again without `since`.
    pub async fn nodes(&self, since: Option<u64>) -> Result<NodesPage, SlurmError> {
        let mut request = self.request(Method::GET, "nodes");
        if let Some(since) = since {
            request = request.query(&[("update_time", since)]);
        }
        let response = self.send("nodes", Lane::NodeListing, request).await?;
        if response.status() == StatusCode::NOT_MODIFIED {
            return Ok(NodesPage::Unchanged);
        }
        let answer: NodesResponse = decode_listing("nodes", response).await?;
        let last_update = answer.last_update.get().filter(|time| *time > 0);
        if since.is_some() && last_update.is_none() && answer.nodes.is_empty() {
            return Ok(NodesPage::Unchanged);
        }
        Ok(NodesPage::All { nodes: answer.nodes, last_update })
    }

    /// One node as Slurm has it now (`GET node/<name>`), or None when Slurm does not know it.
    pub async fn node(&self, name: &str) -> Result<Option<Node>, SlurmError> {
        let response = self.send("node", Lane::Other, self.request(Method::GET, &node_path(name))).await?;
        match decode::<NodesResponse>("node", response).await {
            Ok(answer) => Ok(answer.nodes.into_iter().find(|node| node.name == name)),
            Err(SlurmError::Api { status: 404, .. }) => Ok(None),
            Err(SlurmError::Api { errors, .. }) if !errors.is_empty() && errors.iter().all(unknown_node) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Changes a node's state, reason or comment.
    pub async fn update_node(&self, name: &str, update: &NodeUpdate) -> Result<(), SlurmError> {
        let response =
            self.send("node update", Lane::Other, self.request(Method::POST, &node_path(name)).json(update)).await?;
        decode::<Envelope>("node update", response).await.map(drop)
    }

    /// Deletes a dynamic node's record. A node that is already gone is not an error.
    pub async fn delete_node(&self, name: &str) -> Result<(), SlurmError> {
        let response = self.send("node delete", Lane::Other, self.request(Method::DELETE, &node_path(name))).await?;
        match decode::<Envelope>("node delete", response).await {
            Err(SlurmError::Api { status: 404, .. }) => Ok(()),
            Err(SlurmError::Api { errors, .. }) if errors.iter().all(unknown_node) => Ok(()),
            other => other.map(drop),
        }
    }
}

fn seconds() -> Histogram {
    Histogram::new(SECONDS_BUCKETS)
}

/// Where a request waits for its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lane {
    /// The node poll's own lane, beside the slots.
    NodeListing,
    /// Calls that read many records: they may hold every slot but one.
    Listing,
    /// Writes and single reads: any slot.
    Other,
}

async fn permit(semaphore: &tokio::sync::Semaphore) -> tokio::sync::SemaphorePermit<'_> {
    semaphore.acquire().await.expect("the semaphore is never closed")
}

/// How many listings may be in flight when `requests` may: all but one slot, when there are two.
fn listing_slots(requests: usize) -> usize {
    if requests >= 2 { requests - 1 } else { 1 }
}

/// `node/<name>`, with the name kept to one path segment.
fn node_path(name: &str) -> String {
    let mut path = String::from("node/");
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.".contains(&byte) {
            path.push(byte as char);
        } else {
            path.push_str(&format!("%{byte:02X}"));
        }
    }
    path
}

fn unknown_node(error: &super::ApiMessage) -> bool {
    error.error_number == super::error::INVALID_NODE_NAME
        || error.description.to_ascii_lowercase().contains("invalid node name")
}

/// An allocation's job id, or why there is none.
fn allocated(answer: SubmitResponse) -> Result<u32, SlurmError> {
    match answer.job_id {
        Some(id) if id > 0 && answer.envelope.errors.is_empty() => Ok(id),
        _ => Err(not_submitted(answer)),
    }
}

/// A submission slurmrestd answered without a job: a mistyped field is a warning and no job, so the
/// warnings are reported as the cause too.
fn not_submitted(answer: SubmitResponse) -> SlurmError {
    SlurmError::NotSubmitted(answer.envelope.errors.into_iter().chain(answer.envelope.warnings).collect())
}

fn already_over(error: &super::ApiMessage) -> bool {
    is_over(error.error_number)
}

/// ESLURM_INVALID_JOB_ID and ESLURM_ALREADY_DONE: nothing left to cancel.
fn is_over(error_number: i64) -> bool {
    matches!(error_number, 2017 | 2021)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client of a slurmrestd that is not there (nothing listens on port 9): every request fails
    /// as unreachable.
    fn unreachable() -> SlurmClient {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let signer = TokenSigner::new(b"0123456789abcdef0123456789abcdef", "root", Duration::from_secs(60));
        SlurmClient::new("http://127.0.0.1:9", signer).expect("a valid URL")
    }

    #[tokio::test]
    async fn an_empty_cancel_is_never_sent() {
        let slurm = unreachable();
        assert!(slurm.cancel_jobs::<u32>(&[]).await.unwrap().is_empty());
        assert!(slurm.cancel_jobs(&[1]).await.is_err(), "a real cancel does reach for slurmrestd");
    }
}
