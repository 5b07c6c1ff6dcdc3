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
}

fn describe(messages: &[ApiMessage]) -> String {
    if messages.is_empty() {
        return "no error given".to_string();
    }
    messages.iter().map(ApiMessage::to_string).collect::<Vec<_>>().join("; ")
}
