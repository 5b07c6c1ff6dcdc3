//! Reading slurmrestd's answers. An answer is believed only when it is whole: the body is read up to
//! a cap sized for what was asked, must parse as the answer asked for with its data present (a
//! listing without its list is an error, never an empty listing), and must carry no error;
//! slurmrestd answers 200 to a submission it ignored, so the body's `errors`, not only the status,
//! decide.

use reqwest::{Response, StatusCode};
use serde::de::DeserializeOwned;

use super::model::{CancelJobsResponse, Envelope, JobsResponse, PartitionsResponse, PingResponse, SubmitResponse};
use super::node::NodesResponse;
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
        "jobs" | "job" => MAX_JOBS_ANSWER_BYTES,
        "nodes" => MAX_NODES_ANSWER_BYTES,
        _ => MAX_OTHER_ANSWER_BYTES,
    }
}

/// How much of an unreadable body an error quotes.
const QUOTED: usize = 200;

pub(super) async fn decode<T>(what: &'static str, mut response: Response) -> Result<T, SlurmError>
where
    T: DeserializeOwned + HasEnvelope,
{
    let status = response.status();
    if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::NETWORK_AUTHENTICATION_REQUIRED) {
        return Err(SlurmError::Unauthorized(status.as_u16()));
    }
    let cap = answer_cap(what);
    let too_long = || unreadable(what, status.as_u16(), format!("longer than {cap} bytes"));
    if response.content_length().is_some_and(|length| length > cap as u64) {
        return Err(too_long());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > cap {
            return Err(too_long());
        }
        body.extend_from_slice(&chunk);
    }
    decode_body(what, status.as_u16(), &body)
}

/// The answer in `body`, or why it is not one.
pub(super) fn decode_body<T>(what: &'static str, status: u16, body: &[u8]) -> Result<T, SlurmError>
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
                let quoted = String::from_utf8_lossy(&body[..body.len().min(QUOTED)]);
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
    PartitionsResponse,
    NodesResponse
);

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
