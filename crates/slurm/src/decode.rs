//! Reading slurmrestd's answers. An answer is believed only when it is whole: the body is read up to
//! a cap sized for what was asked, must parse as the answer asked for with its data present (a
//! listing without its list is an error, never an empty listing), and must carry no error;
//! slurmrestd answers 200 to a submission it ignored, so the body's `errors`, not only the status,
//! decide.

use reqwest::{Response, StatusCode};
use serde::de::DeserializeOwned;

use super::job_states::JobStatesResponse;
use super::listing::ListingSplitter;
use super::model::{CancelJobsResponse, Envelope, JobsResponse, PingResponse, SubmitResponse};
use super::node::NodesResponse;
use super::preemption::{ConfResponse, PartitionsResponse, QosResponse};
use super::version::OpenApiPaths;
use super::{ApiMessage, SlurmError};

/// The most of a job listing that is read: above 20,000 jobs (about 113 MB at v0.0.44, from the
/// recorded listing's 5.6 KB per job). A longer body is an error, not a reason to fill memory.
pub const MAX_JOBS_ANSWER_BYTES: usize = 128 << 20;
/// Of a node listing: above 18,000 nodes (the recorded listing's 1.8 KB per node).
pub const MAX_NODES_ANSWER_BYTES: usize = 32 << 20;
/// Of any other answer (a submission's, a ping's, the API's description, Slurm's partitions).
pub const MAX_OTHER_ANSWER_BYTES: usize = 16 << 20;

/// The most of the answer to `what` that is read.
pub(crate) fn answer_cap(what: &str) -> usize {
    match what {
        "jobs" | "job" | "job states" => MAX_JOBS_ANSWER_BYTES,
        "nodes" => MAX_NODES_ANSWER_BYTES,
        _ => MAX_OTHER_ANSWER_BYTES,
    }
}

/// How much of an unreadable body an error quotes.
const QUOTED: usize = 200;

pub(super) async fn decode<T>(what: &'static str, response: Response) -> Result<T, SlurmError>
where
    T: DeserializeOwned + HasEnvelope,
{
    let status = checked(what, &response)?;
    decode_whole(what, status, response).await
}

/// Reads the whole body, up to its cap, and decodes it.
async fn decode_whole<T>(what: &'static str, status: u16, mut response: Response) -> Result<T, SlurmError>
where
    T: DeserializeOwned + HasEnvelope,
{
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > answer_cap(what) {
            return Err(too_long(what, status));
        }
        body.extend_from_slice(&chunk);
    }
    decode_body(what, status, &body)
}

/// A listing, its list's elements parsed as they arrive ([`ListingSplitter`]): the body is never
/// held whole. Any other answer (an error's) is read as [`decode`] reads it.
pub(super) async fn decode_listing<T: Listing>(what: &'static str, mut response: Response) -> Result<T, SlurmError> {
    let status = checked(what, &response)?;
    if !(200..300).contains(&status) {
        return decode_whole(what, status, response).await;
    }
    let (mut splitter, mut read, mut head) = (ListingSplitter::new(T::KEY), 0, Vec::new());
    while let Some(chunk) = response.chunk().await? {
        read += chunk.len();
        if read > answer_cap(what) {
            return Err(too_long(what, status));
        }
        head.extend_from_slice(&chunk[..chunk.len().min(QUOTED.saturating_sub(head.len()))]);
        if let Err(error) = splitter.feed(&chunk) {
            return Err(unreadable(what, status, format!("{error}: {}", String::from_utf8_lossy(&head))));
        }
    }
    let (rest, items) = splitter.finish();
    let mut answer: T = decode_quoting(what, status, &rest, &head)?;
    answer.fill(items);
    Ok(answer)
}

/// The status of an answer worth reading: not a refused token, and no longer than its cap says.
fn checked(what: &'static str, response: &Response) -> Result<u16, SlurmError> {
    let status = response.status();
    if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::NETWORK_AUTHENTICATION_REQUIRED) {
        return Err(SlurmError::Unauthorized(status.as_u16()));
    }
    if response.content_length().is_some_and(|length| length > answer_cap(what) as u64) {
        return Err(too_long(what, status.as_u16()));
    }
    Ok(status.as_u16())
}

fn too_long(what: &'static str, status: u16) -> SlurmError {
    unreadable(what, status, format!("longer than {} bytes", answer_cap(what)))
}

/// The answer in `body`, or why it is not one.
pub(super) fn decode_body<T>(what: &'static str, status: u16, body: &[u8]) -> Result<T, SlurmError>
where
    T: DeserializeOwned + HasEnvelope,
{
    decode_quoting(what, status, body, body)
}

/// The answer in `body`, or why it is not one, quoting the start of `quoted` when it is unreadable.
fn decode_quoting<T>(what: &'static str, status: u16, body: &[u8], quoted: &[u8]) -> Result<T, SlurmError>
where
    T: DeserializeOwned + HasEnvelope,
{
    let success = (200..300).contains(&status);
    match serde_json::from_slice::<T>(body) {
        Ok(answer) if success && answer.envelope().errors.is_empty() => Ok(answer),
        Ok(answer) => Err(SlurmError::Api { what, status, errors: answer.envelope().errors.clone() }),
        // An error answer need not carry the data (a 500 has no `nodes`): its errors still say why.
        Err(error) => match serde_json::from_slice::<Envelope>(body) {
            Ok(envelope) if !envelope.errors.is_empty() => {
                Err(SlurmError::Api { what, status, errors: envelope.errors })
            }
            _ => {
                let quoted = String::from_utf8_lossy(&quoted[..quoted.len().min(QUOTED)]);
                Err(unreadable(what, status, format!("{error}: {quoted}")))
            }
        },
    }
}

fn unreadable(what: &'static str, status: u16, why: String) -> SlurmError {
    let description = format!("unreadable answer ({why})");
    SlurmError::Api { what, status, errors: vec![ApiMessage { description, ..Default::default() }] }
}

pub(super) trait HasEnvelope {
    fn envelope(&self) -> &Envelope;
}

/// An answer whose bulk is one list, read by [`decode_listing`].
pub(super) trait Listing: DeserializeOwned + HasEnvelope {
    type Item: DeserializeOwned;
    /// The list's key at the answer's top level.
    const KEY: &'static str;
    /// Puts the list's elements, parsed apart, back into the answer.
    fn fill(&mut self, items: Vec<Self::Item>);
}

impl Listing for JobsResponse {
    type Item = super::Job;
    const KEY: &'static str = "jobs";
    fn fill(&mut self, items: Vec<Self::Item>) {
        self.jobs = items;
    }
}

impl Listing for JobStatesResponse {
    type Item = super::job_states::JobStatus;
    const KEY: &'static str = "jobs";
    fn fill(&mut self, items: Vec<Self::Item>) {
        self.jobs = items;
    }
}

impl Listing for NodesResponse {
    type Item = super::Node;
    const KEY: &'static str = "nodes";
    fn fill(&mut self, items: Vec<Self::Item>) {
        self.nodes = items;
    }
}

impl HasEnvelope for Envelope {
    fn envelope(&self) -> &Envelope {
        self
    }
}

/// Every other answer carries the envelope in a field of that name.
macro_rules! envelope_field {
    ($($answer:ty),+) => {$(
        impl HasEnvelope for $answer {
            fn envelope(&self) -> &Envelope {
                &self.envelope
            }
        }
    )+};
}

envelope_field!(
    OpenApiPaths,
    PingResponse,
    SubmitResponse,
    CancelJobsResponse,
    JobsResponse,
    JobStatesResponse,
    PartitionsResponse,
    QosResponse,
    ConfResponse,
    NodesResponse
);

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
