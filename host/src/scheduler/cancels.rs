//! Placeholders cancelled for their pods, together: while one cancel is in flight, the others wait,
//! and the next turn cancels all of them in one `DELETE jobs` (as `scancel 1 2 3`). A deleted
//! Deployment's hundreds of pods then cost slurmctld a few RPCs instead of one each, and free their
//! nodes in seconds. A cancel that finds nobody waiting goes alone, as before.

use crate::coalesce::{Coalescer, Joined, Waiter, chunked};
use crate::slurm::{SlurmClient, SlurmError};

/// The most jobs one request cancels (a bound on the request, and on the terminations it starts at once).
const MAX_JOBS: usize = 100;

/// What a shared request did for one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Cancelled,
    /// Slurm refused this job, or the whole request failed: the job goes alone, for Slurm to say
    /// why of this job only.
    GoAlone,
}

/// Cancels waiting for their turn. Cheap to clone; one per scheduler.
#[derive(Clone, Default)]
pub struct Cancels {
    jobs: Coalescer<String, Outcome>,
}

impl Cancels {
    /// Cancels `job` (`12`, or `10_3` for an array's task); a job already over is not an error.
    pub async fn cancel(&self, slurm: &SlurmClient, job: String) -> Result<(), SlurmError> {
        let joined = self
            .jobs
            .join(job.clone(), |batch, turn| async move {
                let _turn = turn;
                for chunk in chunked(batch, MAX_JOBS) {
                    cancel_together(slurm, chunk).await;
                }
            })
            .await;
        match joined {
            Joined::Alone(_, _turn) => slurm.cancel(&job).await,
            Joined::Served(Some(Outcome::Cancelled)) => Ok(()),
            Joined::Served(Some(Outcome::GoAlone) | None) => slurm.cancel(&job).await,
        }
    }
}

async fn cancel_together(slurm: &SlurmClient, waiters: Vec<Waiter<String, Outcome>>) {
    let jobs: Vec<&str> = waiters.iter().map(|w| w.item.as_str()).collect();
    let refused = match slurm.cancel_jobs(&jobs).await {
        Ok(refused) => refused,
        Err(error) => {
            tracing::info!(jobs = jobs.len(), %error, "cancelling placeholders one by one");
            return waiters.into_iter().for_each(|waiter| waiter.answer(Outcome::GoAlone));
        }
    };
    tracing::debug!(jobs = jobs.len(), refused = refused.len(), "cancelled placeholders in one request");
    for waiter in waiters {
        let outcome = match refused.iter().any(|(job, _)| *job == waiter.item) {
            true => Outcome::GoAlone,
            false => Outcome::Cancelled,
        };
        waiter.answer(outcome);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use axum::Router;
    use axum::extract::{Path, State};
    use axum::routing::delete;

    use super::*;
    use crate::slurm::TokenSigner;

    /// Every cancel request a fake slurmrestd got: `jobs 1 2 3` or `job 7`.
    type Requests = Arc<Mutex<Vec<String>>>;

    /// A slurmrestd that cancels every job but `refused` (as a running job of another user would be).
    async fn slurmrestd(refused: &'static str) -> (SlurmClient, Requests) {
        let requests = Requests::default();
        let cancel_many = |State((requests, refused)): State<(Requests, &'static str)>, body: String| async move {
            let body: serde_json::Value = serde_json::from_str(&body).unwrap();
            let jobs: Vec<String> =
                body["jobs"].as_array().unwrap().iter().map(|j| j.as_str().unwrap().to_owned()).collect();
            requests.lock().unwrap().push(format!("jobs {}", jobs.join(" ")));
            let status: Vec<_> = jobs
                .iter()
                .filter(|job| *job == refused)
                .map(|job| serde_json::json!({"step_id": job, "error": {"code": 1, "message": "Access denied"}}))
                .collect();
            serde_json::json!({"status": status}).to_string()
        };
        let cancel_one = |State((requests, refused)): State<(Requests, &'static str)>, Path(job): Path<String>| async move {
            requests.lock().unwrap().push(format!("job {job}"));
            let errors = match job == refused {
                true => serde_json::json!([{"description": "Access denied", "error_number": 1}]),
                false => serde_json::json!([]),
            };
            serde_json::json!({"errors": errors}).to_string()
        };
        let app = Router::new()
            .route("/slurm/v0.0.42/jobs", delete(cancel_many))
            .route("/slurm/v0.0.42/job/{job}", delete(cancel_one))
            .with_state((requests.clone(), refused));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        crate::tls::install_crypto_provider();
        let signer = TokenSigner::new(b"0123456789abcdef0123456789abcdef", "root", Duration::from_secs(60));
        (SlurmClient::new(&url, signer).unwrap(), requests)
    }

    /// Cancels `jobs` while a turn is held, so that all of them wait for the next one.
    async fn cancel_while_a_turn_is_held(slurm: &SlurmClient, jobs: &[&str]) -> Vec<Result<(), SlurmError>> {
        let cancels = Cancels::default();
        let held = cancels.jobs.own_turn().await;
        let waiting: Vec<_> = jobs
            .iter()
            .map(|job| {
                let (cancels, slurm, job) = (cancels.clone(), slurm.clone(), job.to_string());
                tokio::spawn(async move { cancels.cancel(&slurm, job).await })
            })
            .collect();
        while cancels.jobs.waiting() < jobs.len() {
            tokio::task::yield_now().await;
        }
        drop(held);
        let mut results = Vec::new();
        for cancel in waiting {
            results.push(cancel.await.unwrap());
        }
        results
    }

    #[tokio::test]
    async fn cancels_that_wait_together_go_in_one_request() {
        let (slurm, requests) = slurmrestd("none").await;
        let results = cancel_while_a_turn_is_held(&slurm, &["1", "2", "10_3"]).await;
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        assert_eq!(*requests.lock().unwrap(), ["jobs 1 2 10_3"]);
    }

    #[tokio::test]
    async fn a_job_slurm_refuses_goes_alone_and_hears_why() {
        let (slurm, requests) = slurmrestd("2").await;
        let results = cancel_while_a_turn_is_held(&slurm, &["1", "2", "3"]).await;
        assert!(results[0].is_ok() && results[2].is_ok(), "{results:?}");
        let refused = results[1].as_ref().unwrap_err().to_string();
        assert!(refused.contains("Access denied"), "{refused}");
        assert_eq!(*requests.lock().unwrap(), ["jobs 1 2 3", "job 2"]);
    }

    #[tokio::test]
    async fn a_lone_cancel_is_a_request_of_its_own() {
        let (slurm, requests) = slurmrestd("none").await;
        Cancels::default().cancel(&slurm, "5".into()).await.unwrap();
        assert_eq!(*requests.lock().unwrap(), ["job 5"]);
    }
}
