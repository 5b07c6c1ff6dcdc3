use super::model::ApiMessage;

/// What can go wrong talking to slurmrestd.
#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    #[error("cannot reach slurmrestd: {0}")]
    Http(#[from] reqwest::Error),
    #[error("cannot sign a Slurm token: {0}")]
    Token(jsonwebtoken::errors::Error),
    #[error("slurmrestd refused the token (HTTP {0}): check the JWT key and AuthAltParameters")]
    Unauthorized(u16),
    #[error("slurmrestd answered HTTP {status} to {what}: {}", describe(.errors))]
    Api { what: &'static str, status: u16, errors: Vec<ApiMessage> },
    #[error("slurmrestd did not submit the job: {}", describe(.0))]
    NotSubmitted(Vec<ApiMessage>),
    /// No answer in time, the wait for a free request slot included: the request may or may not have
    /// reached Slurm.
    #[error("slurmrestd gave no answer to {0} within {1:?}")]
    NoAnswer(&'static str, std::time::Duration),
    #[error("the Slurm behind slurmrestd cannot do this: {0}")]
    Unsupported(&'static str),
    /// The caller kept the request from leaving (it may not write now): Slurm never saw it.
    #[error("request not sent to slurmrestd: {0}")]
    Withheld(&'static str),
    #[error(transparent)]
    NoCommonApi(#[from] super::version::NoCommonApi),
}

fn describe(messages: &[ApiMessage]) -> String {
    if messages.is_empty() {
        return "no error given".to_string();
    }
    messages.iter().map(ApiMessage::to_string).collect::<Vec<_>>().join("; ")
}

/// What slurmrestd passes on when its connection to slurmctld failed: the system's EPIPE, ECONNRESET,
/// ETIMEDOUT and ECONNREFUSED, and Slurm's communication errors (SLURM_COMMUNICATIONS_*, 1001-1004;
/// SLURMCTLD_COMMUNICATIONS_*, 1800-1804). Seen from slurmrestd 26.05 while slurmctld restarted:
/// `Connection reset by peer: Batch job submission failed (error 104)`.
const SLURMCTLD_UNREACHABLE: &[i64] = &[32, 104, 110, 111, 1001, 1002, 1003, 1004, 1800, 1801, 1802, 1803, 1804];

/// ESLURM_INVALID_NODE_NAME: a node named in the request is unknown to Slurm (deleted since, say).
pub(super) const INVALID_NODE_NAME: i64 = 2018;

impl SlurmError {
    /// Whether Slurm refused a job, or a change to one, because a node it names (among its excluded
    /// nodes, say) was deleted since.
    pub fn names_a_vanished_node(&self) -> bool {
        match self {
            SlurmError::Api { errors, .. } | SlurmError::NotSubmitted(errors) => {
                errors.iter().any(|e| e.error_number == INVALID_NODE_NAME)
            }
            _ => false,
        }
    }

    /// Whether slurmrestd refused to change an array's task named by its task id (`159_1`): it
    /// refuses every such update (see [`crate::Job::update_id`] for the id that may be named).
    pub fn refuses_a_task_update(&self) -> bool {
        match self {
            SlurmError::Api { errors, .. } => {
                errors.iter().any(|e| e.description.contains("against Array Job's JobID"))
            }
            _ => false,
        }
    }

    /// Whether the request got no answer (it may have reached Slurm, or not): for a submission, the
    /// job may exist. slurmrestd that could not talk to slurmctld (restarting, say) answers with an
    /// error list too: that is no answer from Slurm either, and no refusal of the job.
    pub fn is_unanswered(&self) -> bool {
        match self {
            SlurmError::Http(_) | SlurmError::NoAnswer(..) => true,
            SlurmError::Api { errors, .. } | SlurmError::NotSubmitted(errors) => {
                errors.iter().any(|e| SLURMCTLD_UNREACHABLE.contains(&e.error_number))
            }
            _ => false,
        }
    }

    /// slurmrestd's answer to an incremental node listing when nodes changed but partitions did not.
    pub fn is_partitions_unchanged(&self) -> bool {
        match self {
            SlurmError::Api { status: 500, errors, .. } => {
                errors.iter().any(|error| error.to_string().to_ascii_lowercase().contains("unable to query partitions"))
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_a_refused_task_update() {
        // slurmrestd 24.11.5's answer to an update naming an array's task.
        let description = "Query empty or not RFC7320 compliant: Rejecting request. Submit job update against \
                           Array Job's JobID instead of array task id.";
        let message = ApiMessage { description: description.into(), error_number: 9000, ..Default::default() };
        let refused = SlurmError::Api { what: "job update", status: 422, errors: vec![message] };
        assert!(refused.refuses_a_task_update());
        assert!(!SlurmError::Api { what: "job update", status: 422, errors: vec![] }.refuses_a_task_update());
    }

    #[test]
    fn recognises_the_partitions_quirk() {
        let quirk = SlurmError::Api {
            what: "nodes",
            status: 500,
            errors: vec![ApiMessage { description: "Unable to query partitions".into(), ..Default::default() }],
        };
        assert!(quirk.is_partitions_unchanged());
        let other = SlurmError::Api { what: "nodes", status: 500, errors: vec![] };
        assert!(!other.is_partitions_unchanged());
    }

    #[test]
    fn a_slurmctld_out_of_reach_is_no_answer_and_no_refusal() {
        let error = |number| SlurmError::Api {
            what: "job/submit",
            status: 500,
            errors: vec![ApiMessage { error_number: number, ..Default::default() }],
        };
        assert!(error(104).is_unanswered(), "connection reset while slurmctld restarted");
        assert!(error(1800).is_unanswered());
        assert!(!error(2018).is_unanswered(), "an unknown node is a refusal");
        assert!(!error(2001).is_unanswered());
    }
}
