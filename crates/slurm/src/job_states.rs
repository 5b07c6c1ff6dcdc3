//! Every job's state and nothing else (`GET /jobs/state/`), as one fingerprint: whether anything a
//! job's state says changed since a full listing, for a fraction of its cost. At 10,000 pending jobs a
//! full listing is 56 MB of JSON that slurmctld packs and the host parses; their states are under 1 MB.
//! The jobs it lists as running come with it: a poller can see which of its pending jobs started, and
//! read those alone, before the full listing.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

use serde::{Deserialize, Deserializer};

use super::Job;
use super::model::{Envelope, array_task_ids};

/// What `GET /jobs/state/` said, reduced to a count and a fingerprint of every (job, state) pair.
/// Two equal values mean, but for a hash collision, that no job came, went or changed state between
/// the two listings (a pending array is listed task by task, so a task that starts changes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct JobStates {
    pub jobs: usize,
    fingerprint: u64,
}

impl JobStates {
    /// The fingerprint of `(job, state flags)` pairs, in any order: Slurm's order is its hash table's.
    pub fn of<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a [String])>) -> Self {
        let mut states = Self::default();
        for (job, flags) in pairs {
            // Keyless SipHash: the same in every process and run; its value is only compared.
            let mut hasher = DefaultHasher::new();
            (job, flags).hash(&mut hasher);
            // A sum, so that the order does not count.
            states.fingerprint = states.fingerprint.wrapping_add(hasher.finish());
            states.jobs += 1;
        }
        states
    }
}

/// What `GET /jobs/state/` said: the fingerprint of every job's state, and the jobs it lists as
/// running, by name (`12`, or `8_0` for an array's task).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobStatesListing {
    pub states: JobStates,
    pub running: HashSet<String>,
}

impl JobStatesListing {
    pub fn of<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a [String])> + Clone) -> Self {
        let running = pairs.clone().into_iter().filter(|(_, state)| runs(state)).map(|(job, _)| job.to_owned());
        Self { running: running.collect(), states: JobStates::of(pairs) }
    }

    /// What `GET /jobs/state/` lists for these jobs of a full listing: a job by its id, an array's task
    /// by its own job id and task (`8_0`, though it is task 0 of array 6), and each pending task of
    /// an array's record by the record's id (the end-to-end suite holds Slurm to it).
    pub fn of_listing<'a>(jobs: impl IntoIterator<Item = &'a Job>) -> Self {
        let named: Vec<(String, &[String])> = jobs
            .into_iter()
            .flat_map(|job| {
                let pending_tasks = array_task_ids(&job.array_task_string);
                let names: Vec<String> = match job.array_task_id.get() {
                    _ if !pending_tasks.is_empty() => {
                        pending_tasks.iter().map(|task| format!("{}_{task}", job.job_id)).collect()
                    }
                    Some(task) => vec![format!("{}_{task}", job.job_id)],
                    None => vec![job.job_id.to_string()],
                };
                names.into_iter().map(|name| (name, job.job_state.as_slice()))
            })
            .collect();
        Self::of(named.iter().map(|(name, state)| (name.as_str(), *state)))
    }
}

/// Slurm's first flag is the job's base state (`RUNNING`, then perhaps `COMPLETING`).
fn runs(state: &[String]) -> bool {
    state.first().is_some_and(|base| base == "RUNNING")
}

/// One job's record in `GET /jobs/state/`: `{"job_id": "10_3", "state": ["PENDING"]}`.
#[derive(Debug, Deserialize)]
pub(super) struct JobStatus {
    #[serde(deserialize_with = "job_name")]
    job_id: String,
    /// Required: a record without its state is unreadable, not "no state".
    state: Vec<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct JobStatesResponse {
    /// Required: a listing without its list is unreadable, never "no jobs".
    pub jobs: Vec<JobStatus>,
    #[serde(flatten)]
    pub envelope: Envelope,
}

impl JobStatesResponse {
    pub(super) fn listing(&self) -> JobStatesListing {
        JobStatesListing::of(self.jobs.iter().map(|job| (job.job_id.as_str(), job.state.as_slice())))
    }
}

/// A job's name as slurmrestd writes it here: `"10_3"`, or a bare number.
fn job_name<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Name {
        Text(String),
        Number(u64),
    }
    Ok(match Name::deserialize(deserializer)? {
        Name::Text(text) => text,
        Name::Number(number) => number.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NoValue;
    use serde_json::json;

    fn states(answer: serde_json::Value) -> JobStates {
        listing(answer).states
    }

    fn listing(answer: serde_json::Value) -> JobStatesListing {
        serde_json::from_value::<JobStatesResponse>(answer).expect("readable").listing()
    }

    #[test]
    fn the_order_of_the_listing_does_not_count_but_every_job_and_flag_does() {
        let listed = |jobs: serde_json::Value| states(json!({"jobs": jobs, "errors": []}));
        let a = json!({"job_id": "1_1", "state": ["PENDING"]});
        let b = json!({"job_id": 2, "state": ["RUNNING"]});
        assert_eq!(listed(json!([a, b])), listed(json!([b, a])));
        assert_eq!(listed(json!([a, b])).jobs, 2);
        assert_eq!(listed(json!([{"job_id": "2", "state": ["RUNNING"]}])), listed(json!([b])), "a number is its name");
        let completing = json!({"job_id": 2, "state": ["RUNNING", "COMPLETING"]});
        assert_ne!(listed(json!([a, b])), listed(json!([a, completing])));
        assert_ne!(listed(json!([a, b])), listed(json!([a])));
        let started = json!({"job_id": "1_1", "state": ["RUNNING"]});
        assert_ne!(listed(json!([a, b])), listed(json!([started, b])));
    }

    #[test]
    fn a_full_listing_names_its_jobs_as_the_states_do() {
        let job = |id: u32, array: u64, task: Option<u64>, pending: &str, state: &str| Job {
            job_id: id,
            array_job_id: NoValue::of(array),
            array_task_id: task.map_or_else(NoValue::default, NoValue::of),
            array_task_string: pending.into(),
            job_state: vec![state.into()],
            ..Default::default()
        };
        let listing =
            [job(5, 5, None, "0-1", "PENDING"), job(8, 6, Some(0), "", "RUNNING"), job(7, 0, None, "", "PENDING")];
        let listed = states(json!({"errors": [], "jobs": [
            {"job_id": "5_0", "state": ["PENDING"]}, {"job_id": "5_1", "state": ["PENDING"]},
            {"job_id": "8_0", "state": ["RUNNING"]}, {"job_id": "7", "state": ["PENDING"]},
        ]}));
        assert_eq!(JobStatesListing::of_listing(&listing).states, listed);
    }

    #[test]
    fn the_running_jobs_are_named_as_listed_whatever_flags_follow() {
        let listed = listing(json!({"errors": [], "jobs": [
            {"job_id": "5_0", "state": ["PENDING"]}, {"job_id": 7, "state": ["RUNNING", "COMPLETING"]},
            {"job_id": "8_0", "state": ["RUNNING"]}, {"job_id": 9, "state": ["COMPLETED"]},
            {"job_id": 10, "state": ["PENDING", "REQUEUED"]},
        ]}));
        let mut running: Vec<&str> = listed.running.iter().map(String::as_str).collect();
        running.sort_unstable();
        assert_eq!(running, ["7", "8_0"]);
        assert_eq!(listed.states.jobs, 5);
    }

    #[test]
    fn a_record_without_its_state_or_a_listing_without_its_list_is_unreadable() {
        let no_state = json!({"jobs": [{"job_id": 1}], "errors": []});
        assert!(serde_json::from_value::<JobStatesResponse>(no_state).is_err());
        assert!(serde_json::from_value::<JobStatesResponse>(json!({"errors": []})).is_err());
    }
}
