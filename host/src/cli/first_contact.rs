//! The host's first contact with Slurm: which Slurm, and which API version to speak with it.
//!
//! Installed together, the host starts before slurmctld does: exiting then cost a fresh install
//! restarts and a crash loop's back-off. So it asks again, with back-off, not ready meanwhile and
//! saying why on `/readyz`, while serving `/metrics` and `/healthz`.

use std::error::Error;
use std::future::Future;
use std::time::Duration;

use crate::http::Gate;
use crate::slurm::{SlurmClient, SlurmInfo};

/// The readiness check that waits here.
pub const CHECK: &str = "slurm";

/// How long to wait between two tries: doubling from `first` to `longest`.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    pub first: Duration,
    pub longest: Duration,
}

impl Backoff {
    /// slurmctld takes seconds to start; a Slurm that is down for long is asked every 30 s.
    pub const SLURM: Backoff = Backoff { first: Duration::from_secs(1), longest: Duration::from_secs(30) };

    fn after(self, waited: Duration) -> Duration {
        (waited * 2).clamp(self.first, self.longest)
    }
}

/// Asks Slurm until it answers (see [`SlurmClient::discover`]); `gate` is held, saying why, until then.
pub async fn discover(slurm: &SlurmClient, gate: &Gate) -> SlurmInfo {
    until_answered(|| slurm.discover(), gate, Backoff::SLURM).await
}

/// Calls `ask` until it succeeds, waiting `backoff` between tries. Each failure holds `gate` with
/// its error; a warning is logged only when the error differs from the last one, so that a Slurm
/// down for an hour logs once, not every 30 s.
pub async fn until_answered<T, E: Error, F: Future<Output = Result<T, E>>>(
    mut ask: impl FnMut() -> F,
    gate: &Gate,
    backoff: Backoff,
) -> T {
    let mut last_error: Option<String> = None;
    let mut wait = Duration::ZERO;
    loop {
        match ask().await {
            Ok(answer) => {
                gate.open();
                return answer;
            }
            Err(error) => {
                let error = with_causes(&error);
                wait = backoff.after(wait);
                if last_error.as_deref() != Some(error.as_str()) {
                    tracing::warn!(retry = ?wait, "Slurm does not answer yet ({error}); asking again until it does");
                }
                gate.hold(format!("waiting for Slurm: {error}"));
                last_error = Some(error);
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// The error and what caused it, on one line: "error sending request" alone does not tell a refused
/// connection from a name that does not resolve. A cause its error already quotes is not repeated.
fn with_causes(error: &dyn Error) -> String {
    let mut said = error.to_string();
    let mut cause = error.source();
    while let Some(error) = cause {
        let text = error.to_string();
        if !said.ends_with(&text) {
            said = format!("{said}: {text}");
        }
        cause = error.source();
    }
    said
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::http::Readiness;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot reach slurmrestd: {0}")]
    struct Unreachable(#[source] Sending);

    #[derive(Debug, thiserror::Error)]
    #[error("error sending request")]
    struct Sending(#[source] std::io::Error);

    #[test]
    fn an_error_says_each_cause_once() {
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused");
        let said = with_causes(&Unreachable(Sending(refused)));
        assert_eq!(said, "cannot reach slurmrestd: error sending request: Connection refused");
    }

    #[test]
    fn the_wait_doubles_up_to_the_longest() {
        let backoff = Backoff::SLURM;
        let mut wait = Duration::ZERO;
        let waits: Vec<u64> = (0..8)
            .map(|_| {
                wait = backoff.after(wait);
                wait.as_secs()
            })
            .collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30, 30]);
    }

    #[tokio::test]
    async fn readiness_says_the_last_error_until_slurm_answers() {
        let readiness = Readiness::default();
        let gate = readiness.gate(CHECK, "not asked yet");
        let refused = |why: &str| Err(std::io::Error::other(why.to_owned()));
        let answers = Mutex::new(vec![Ok("26.05"), refused("no slurmctld responded"), refused("connection refused")]);
        let seen = Mutex::new(Vec::new());
        let ask = || {
            seen.lock().unwrap().push(readiness.why_not());
            let answer = answers.lock().unwrap().pop().unwrap();
            async move { answer }
        };
        let fast = Backoff { first: Duration::from_millis(1), longest: Duration::from_millis(2) };
        assert_eq!(until_answered(ask, &gate, fast).await, "26.05");
        let said = |why: &str| Some(format!("slurm: {why}"));
        assert_eq!(
            seen.into_inner().unwrap(),
            [
                said("not asked yet"),
                said("waiting for Slurm: connection refused"),
                said("waiting for Slurm: no slurmctld responded")
            ]
        );
        assert_eq!(readiness.why_not(), None, "ready once Slurm answered");
    }
}
