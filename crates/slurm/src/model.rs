//! The subset of slurmrestd's v0.0.42 data model that sunk reads and writes.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::SharedText;

/// Slurm's optional number: `{"set": true, "number": N}`, or `{"infinite": true}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoValue {
    #[serde(default)]
    pub set: bool,
    #[serde(default)]
    pub infinite: bool,
    #[serde(default)]
    pub number: u64,
}

impl NoValue {
    pub fn of(number: u64) -> Self {
        Self { set: true, infinite: false, number }
    }

    pub fn get(&self) -> Option<u64> {
        (self.set && !self.infinite).then_some(self.number)
    }
}

/// One entry of a response's `errors` or `warnings`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiMessage {
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub error: String,
    #[serde(default)]
    pub error_number: i64,
    #[serde(default)]
    pub source: String,
}

impl fmt::Display for ApiMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = [self.error.as_str(), self.description.as_str()]
            .into_iter()
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .join(": ");
        if self.error_number != 0 {
            write!(f, "{text} (error {}{})", self.error_number, source_suffix(&self.source))
        } else {
            write!(f, "{text}{}", source_suffix(&self.source))
        }
    }
}

fn source_suffix(source: &str) -> String {
    if source.is_empty() { String::new() } else { format!(" in {source}") }
}

/// `--exclusive` as slurmrestd spells it (`shared`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Exclusive {
    /// Whole nodes (`--exclusive`).
    None,
    User,
    Mcs,
    Topo,
}

/// A job to submit (`job_desc_msg`). Unset fields are left out so Slurm applies its defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct JobDescription {
    pub name: String,
    /// Empty for an allocation (`job/allocate`), which runs no script.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub script: String,
    /// An allocation that must start now or fail (`salloc --immediate`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub immediate: Option<bool>,
    pub current_working_directory: String,
    pub environment: Vec<String>,
    /// Where the job's output goes (`--output`); Slurm's `slurm-<id>.out` in the working directory
    /// when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standard_output: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standard_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_comment: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qos: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reservation: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constraints: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefer: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub excluded_nodes: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub required_nodes: Vec<String>,
    #[serde(rename = "shared", skip_serializing_if = "Option::is_none", serialize_with = "one_element")]
    pub exclusive: Option<Exclusive>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<NoValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_limit: Option<NoValue>,
    pub cpus_per_task: u32,
    /// Node count (a gang's job: one node per pod).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minimum_nodes: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maximum_nodes: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tasks: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tasks_per_node: Option<u32>,
    pub memory_per_node: NoValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tres_per_node: Option<String>,
    /// A job array's task ids (`0-9`, as `sbatch --array`): one submission, one job per task.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub array: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<JobFlag>,
}

/// Flags of a job to submit (`job_desc_msg.flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum JobFlag {
    /// A job Slurm schedules and accounts for but never launches on a node: it has no script, and
    /// slurmd hears nothing of it (data parser v0.0.43 and later). It cannot be an array task.
    #[serde(rename = "EXTERNAL_JOB")]
    External,
}

fn one_element<S: serde::Serializer>(value: &Option<Exclusive>, serializer: S) -> Result<S::Ok, S::Error> {
    value.as_slice().serialize(serializer)
}

/// Where a job is in its life, reduced to what a placeholder's owner acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    Pending,
    Running,
    /// Suspended, completing, requeued, configuring: neither runnable nor over.
    Transient,
    /// Over for good: completed, cancelled, failed, timed out, preempted, node failure...
    Ended,
}

impl JobState {
    /// Classifies slurmrestd's `job_state` flags (base state first, then flags such as COMPLETING).
    pub fn from_flags(flags: &[String]) -> Self {
        let has = |name: &str| flags.iter().any(|flag| flag == name);
        let base = flags.first().map(String::as_str);
        let requeueing = has("REQUEUED") || has("REQUEUE_HOLD") || has("SPECIAL_EXIT");
        // Cancelled, failed, completed...: over for good, even while Slurm still cleans up after it
        // (COMPLETING); only a requeue brings such a job back.
        if !matches!(base, Some("PENDING" | "RUNNING" | "SUSPENDED")) && !requeueing {
            return Self::Ended;
        }
        if has("COMPLETING") || requeueing || has("CONFIGURING") || has("SUSPENDED") || has("RESIZING") {
            return Self::Transient;
        }
        match base {
            Some("PENDING") => Self::Pending,
            Some("RUNNING") => Self::Running,
            Some("SUSPENDED") => Self::Transient,
            _ => Self::Ended,
        }
    }
}

/// One job as listed by `GET /jobs`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Job {
    pub job_id: u32,
    #[serde(default)]
    pub name: String,
    /// Shared by the records of one array's pending tasks (see [`SharedText`]).
    #[serde(default)]
    pub admin_comment: SharedText,
    /// The user-visible comment (a policy may set it).
    #[serde(default)]
    pub comment: String,
    #[serde(default)]
    pub account: String,
    /// Required: a job without a state would read as ended.
    pub job_state: Vec<String>,
    /// Allocated nodes as a Slurm host list (`slurm-[1-2]`), empty while pending.
    #[serde(default)]
    pub nodes: String,
    #[serde(default)]
    pub state_reason: String,
    /// What slurmctld itself noted on the job, e.g. why it holds it
    /// (`slurm_cred_create failure, holding job.`); empty for most jobs.
    #[serde(default)]
    pub system_comment: String,
    #[serde(default)]
    pub partition: String,
    /// Its QOS; empty where Slurm keeps no accounting.
    #[serde(default)]
    pub qos: String,
    #[serde(default)]
    pub priority: NoValue,
    /// Nodes the job may not run on, as a comma list or host list; empty for none.
    #[serde(default)]
    pub excluded_nodes: String,
    /// A batch job (with a script), as opposed to an allocation.
    #[serde(default)]
    pub batch_flag: bool,
    #[serde(default)]
    pub user_name: String,
    /// The uid it runs as; slurmctld lists it whether or not it can resolve the uid to a name.
    #[serde(default)]
    pub user_id: Option<u32>,
    /// The gid it runs as.
    #[serde(default)]
    pub group_id: Option<u32>,
    /// When it started running (UNIX seconds), or is expected to.
    #[serde(default)]
    pub start_time: NoValue,
    /// When Slurm's own preemption signalled it (UNIX seconds); unset unless it was preempted.
    #[serde(default)]
    pub preempt_time: NoValue,
    /// Whether Slurm may requeue it (`--requeue`, or the cluster's JobRequeue).
    #[serde(default)]
    pub requeue: bool,
    /// What it holds, e.g. `cpu=2,mem=256M,node=1,billing=2,gres/gpu=1` (empty while pending).
    #[serde(default)]
    pub tres_alloc_str: String,
    /// What it asks for per node, e.g. `gres/gpu:2`.
    #[serde(default)]
    pub tres_per_node: String,
    /// CPUs asked for, in all.
    #[serde(default)]
    pub cpus: NoValue,
    /// The array this job is a task of (the id of the array's first record); 0 when it is none.
    #[serde(default)]
    pub array_job_id: NoValue,
    /// Its task number in that array; unset for a record that stands for several pending tasks.
    #[serde(default)]
    pub array_task_id: NoValue,
    /// The tasks still pending together in this one record, e.g. `3-7,9`; empty otherwise.
    #[serde(default)]
    pub array_task_string: String,
    /// Nodes asked for (a range's minimum).
    #[serde(default)]
    pub node_count: NoValue,
    /// MiB per node, when asked per node.
    #[serde(default)]
    pub memory_per_node: NoValue,
}

/// A change to a job (`POST /job/{id}`). Unset fields are left as they are.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct JobUpdate {
    /// Replaces the excluded nodes; `Some(vec![])` clears them.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "cleared_when_empty")]
    pub excluded_nodes: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_comment: Option<String>,
    /// Replaces the user-visible comment; `Some("")` clears it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// slurmrestd ignores an empty list; one empty name clears the field.
fn cleared_when_empty<S: serde::Serializer>(value: &Option<Vec<String>>, serializer: S) -> Result<S::Ok, S::Error> {
    match value.as_deref() {
        Some([]) => [""].serialize(serializer),
        other => other.serialize(serializer),
    }
}

impl Job {
    pub fn state(&self) -> JobState {
        JobState::from_flags(&self.job_state)
    }

    /// Whether it holds nodes now: running, suspended, starting, or cleaning up after it ended.
    pub fn holds_nodes(&self) -> bool {
        !self.nodes.is_empty()
            && self
                .job_state
                .iter()
                .any(|flag| matches!(flag.as_str(), "RUNNING" | "COMPLETING" | "CONFIGURING" | "SUSPENDED"))
    }

    /// The state as Slurm prints it, e.g. `RUNNING` or `PENDING`.
    pub fn state_name(&self) -> String {
        self.job_state.join("+")
    }

    /// The task of an array this record is, if it is one task: `(array job id, task id)`.
    ///
    /// Slurm 26.05 lists an array's pending remainder down to one task with no `array_task_id` and
    /// that task in `array_task_string` ("2"), where 24.11 sets the id: read either, or a cancel
    /// meant for that task would name the whole array.
    pub fn array_task(&self) -> Option<(u32, u32)> {
        let array = u32::try_from(self.array_job_id.get()?).ok().filter(|id| *id > 0)?;
        let task = match self.array_task_id.get() {
            Some(task) => u32::try_from(task).ok()?,
            None => self.array_task_string.parse().ok()?,
        };
        Some((array, task))
    }

    /// The array tasks this record stands for: its own task, or the tasks still pending together in
    /// it; none for a job that is no array's.
    pub fn array_tasks(&self) -> Vec<u32> {
        match self.array_task() {
            Some((_, task)) => vec![task],
            None if self.array_job_id.get().is_some_and(|id| id > 0) => array_task_ids(&self.array_task_string),
            None => Vec::new(),
        }
    }

    /// Whether Slurm cut this record's list of pending tasks short (`1-3,6-7,...`): libslurm does past
    /// `SLURM_BITSTR_LEN` characters (64 unless set; 0 lifts the limit), and the tasks past the cut,
    /// and so the pods they hold, cannot be told.
    pub fn array_tasks_cut(&self) -> bool {
        self.array_task_string.ends_with("...")
    }

    /// How Slurm is told which job is meant: `12`, or `10_3` for task 3 of array 10 (which names the
    /// task whether it is still pending with its siblings or runs as a job of its own).
    pub fn target(&self) -> String {
        match self.array_task() {
            Some((array, task)) => format!("{array}_{task}"),
            None => self.job_id.to_string(),
        }
    }

    /// How long the job has run, in seconds, when Slurm says when it started.
    pub fn seconds_running(&self) -> Option<u64> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |now| now.as_secs());
        self.start_time.get().filter(|start| *start > 0).map(|start| now.saturating_sub(start))
    }

    /// The id a job update may name to change this record's job and no other, if there is one.
    /// slurmrestd refuses an update naming an array's task (`10_3`), and the array's own id (`10`)
    /// names its record, where the tasks not started yet wait together: a task is changed alone only
    /// once it left that record (it started, or was requeued), and the last task to start never
    /// leaves it (to cancel, the task's id names it alone).
    pub fn update_id(&self) -> Option<u32> {
        match self.array_job_id.get() {
            Some(array) if array == u64::from(self.job_id) => None,
            _ => Some(self.job_id),
        }
    }
}

/// The most tasks an array may have: Slurm's largest `MaxArraySize` (4000001) allows ids 0-4000000.
const MOST_ARRAY_TASKS: usize = 4_000_001;

/// The task ids of Slurm's task string (`0-3,7,9-10`, maybe with a `%limit`); none if it is not one
/// (nor if it names more tasks than any Slurm array has: `0-4294967295` would fill memory).
pub fn array_task_ids(tasks: &str) -> Vec<u32> {
    let tasks = tasks.split_once('%').map_or(tasks, |(tasks, _limit)| tasks);
    // A list libslurm cut short (`1-3,60,6...`, see `Job::array_tasks_cut`): its last item may be
    // cut too; the tasks before it stand.
    let tasks = match tasks.strip_suffix("...") {
        Some(cut) => cut.rsplit_once(',').map_or("", |(whole, _cut_item)| whole),
        None => tasks,
    };
    let mut ids = Vec::new();
    for part in tasks.split(',').filter(|part| !part.is_empty()) {
        let range = match part.split_once('-') {
            Some((first, last)) => first.parse::<u32>().ok().zip(last.parse::<u32>().ok()),
            None => part.parse::<u32>().ok().map(|id| (id, id)),
        };
        match range {
            Some((first, last)) if first <= last && ((last - first) as usize) < MOST_ARRAY_TASKS - ids.len() => {
                ids.extend(first..=last)
            }
            _ => return Vec::new(),
        }
    }
    ids
}

#[derive(Debug, Deserialize)]
pub(super) struct Envelope {
    #[serde(default)]
    pub errors: Vec<ApiMessage>,
    #[serde(default)]
    pub warnings: Vec<ApiMessage>,
}

#[derive(Debug, Deserialize)]
pub(super) struct PingResponse {
    #[serde(default)]
    pub meta: Meta,
    /// One per slurmctld; slurmrestd answers 200 even when none responds, as it does to a token it
    /// refused (with `responding: false`).
    #[serde(default)]
    pub pings: Vec<Ping>,
    #[serde(flatten)]
    pub envelope: Envelope,
}

#[derive(Debug, Deserialize)]
pub(super) struct Ping {
    #[serde(default)]
    pub responding: bool,
}

#[derive(Debug, Deserialize)]
pub(super) struct SubmitResponse {
    pub job_id: Option<u32>,
    #[serde(flatten)]
    pub envelope: Envelope,
}

#[derive(Debug, Deserialize)]
pub(super) struct JobsResponse {
    /// Required: a listing without its list is unreadable, never "no jobs".
    pub jobs: Vec<Job>,
    #[serde(default)]
    pub last_update: NoValue,
    #[serde(flatten)]
    pub envelope: Envelope,
}

/// The answer to `DELETE jobs`: the jobs Slurm did not signal, each with why.
#[derive(Debug, Deserialize)]
pub(super) struct CancelJobsResponse {
    #[serde(default)]
    pub status: Vec<NotSignalled>,
    #[serde(flatten)]
    pub envelope: Envelope,
}

#[derive(Debug, Deserialize)]
pub(super) struct NotSignalled {
    /// The job as it was asked for (a job id, or an array/step expression).
    #[serde(default)]
    pub step_id: String,
    #[serde(default)]
    pub error: SignalError,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct SignalError {
    #[serde(default)]
    pub code: i64,
    #[serde(default)]
    pub message: String,
}

/// `meta` of a v0.0.42 answer: which Slurm answered.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Meta {
    #[serde(default)]
    slurm: MetaSlurm,
}

#[derive(Debug, Default, Deserialize)]
struct MetaSlurm {
    #[serde(default)]
    release: Option<String>,
}

impl Meta {
    pub(super) fn release(&self) -> String {
        self.slurm.release.clone().filter(|release| !release.is_empty()).unwrap_or_else(|| "unknown".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn classifies_job_states() {
        assert_eq!(JobState::from_flags(&flags(&["PENDING"])), JobState::Pending);
        assert_eq!(JobState::from_flags(&flags(&["RUNNING"])), JobState::Running);
        assert_eq!(JobState::from_flags(&flags(&["RUNNING", "COMPLETING"])), JobState::Transient);
        assert_eq!(JobState::from_flags(&flags(&["CANCELLED"])), JobState::Ended);
        assert_eq!(JobState::from_flags(&flags(&["PREEMPTED"])), JobState::Ended);
        assert_eq!(JobState::from_flags(&flags(&["PENDING", "REQUEUED"])), JobState::Transient);
        assert_eq!(JobState::from_flags(&flags(&["CANCELLED", "COMPLETING"])), JobState::Ended, "over, cleaning up");
        assert_eq!(JobState::from_flags(&flags(&["PREEMPTED", "REQUEUED"])), JobState::Transient);
    }

    #[test]
    fn names_an_array_task_as_24_11_and_26_05_list_it() {
        let record = |task_id: NoValue, tasks: &str| Job {
            job_id: 7,
            array_job_id: NoValue::of(6),
            array_task_id: task_id,
            array_task_string: tasks.into(),
            ..Default::default()
        };
        // A running task; 24.11's pending remainder of one task; 26.05's, which says it in the string.
        assert_eq!(record(NoValue::of(0), "").target(), "6_0");
        assert_eq!(record(NoValue::of(2), "").target(), "6_2");
        assert_eq!(record(NoValue::default(), "2").target(), "6_2");
        // Several tasks pending together are the array's record, not one task.
        assert_eq!(record(NoValue::default(), "2-4").array_task(), None);
        assert_eq!(Job { job_id: 5, ..Default::default() }.target(), "5");
        // libslurm's cut, as slurmrestd lists it without SLURM_BITSTR_LEN=0 (26.05.5).
        let cut = "1-3,6-7,14,17,20-22,27,32-33,35-36,38,41,48,50-51,56-58,60,6...";
        assert!(record(NoValue::default(), cut).array_tasks_cut());
        assert!(!record(NoValue::default(), "1-3,6-7,14").array_tasks_cut());
        assert_eq!(array_task_ids("1-3,6-7,6..."), [1, 2, 3, 6, 7], "the tasks before the cut");
        assert_eq!(array_task_ids("12..."), Vec::<u32>::new());
    }

    #[test]
    fn an_array_task_is_updated_alone_only_through_a_record_of_its_own() {
        let task = |job_id: u32| Job {
            job_id,
            array_job_id: NoValue::of(6),
            array_task_id: NoValue::of(1),
            ..Default::default()
        };
        assert_eq!(task(7).update_id(), Some(7), "started or requeued: a job id of its own");
        assert_eq!(task(6).update_id(), None, "the array's record: its id names the tasks waiting in it");
        let pending = Job { job_id: 6, array_job_id: NoValue::of(6), array_task_string: "1-3".into(), ..task(6) };
        assert_eq!(pending.update_id(), None);
        // Not an array's: 24.11 and 26.05 list array_job_id 0.
        assert_eq!(Job { job_id: 5, array_job_id: NoValue::of(0), ..Default::default() }.update_id(), Some(5));
        assert_eq!(Job { job_id: 5, ..Default::default() }.update_id(), Some(5));
    }

    #[test]
    fn task_strings_are_read_as_slurm_writes_them() {
        assert_eq!(array_task_ids("0-3,7,9-10"), [0, 1, 2, 3, 7, 9, 10]);
        assert_eq!(array_task_ids("4-5%2"), [4, 5]);
        assert_eq!(array_task_ids(""), Vec::<u32>::new());
        assert_eq!(array_task_ids("3-1"), Vec::<u32>::new(), "not a range: nothing, never a guess");
        assert_eq!(array_task_ids("x"), Vec::<u32>::new());
        assert_eq!(array_task_ids("0-4294967295"), Vec::<u32>::new(), "more tasks than any array has");
        assert_eq!(array_task_ids("0-3999999,4000000").len(), 4_000_001);
        assert_eq!(array_task_ids("0-3999999,4000000-4000001"), Vec::<u32>::new());
        let pending = Job { array_job_id: NoValue::of(6), array_task_string: "1-3".into(), ..Default::default() };
        assert_eq!(pending.array_tasks(), [1, 2, 3]);
        assert_eq!(Job { array_task_string: "1-3".into(), ..Default::default() }.array_tasks(), Vec::<u32>::new());
    }

    #[test]
    fn leaves_unset_fields_out_of_a_submission() {
        let job = JobDescription {
            name: "pod".into(),
            exclusive: Some(Exclusive::User),
            memory_per_node: NoValue::of(100),
            ..Default::default()
        };
        let json = serde_json::to_value(&job).unwrap();
        assert_eq!(json["shared"], serde_json::json!(["user"]));
        assert_eq!(json["memory_per_node"]["number"], 100);
        assert!(json.get("partition").is_none());
        assert!(json.get("excluded_nodes").is_none());
    }

    #[test]
    fn an_update_clears_excluded_nodes_with_one_empty_name() {
        let clear = JobUpdate { excluded_nodes: Some(vec![]), ..Default::default() };
        assert_eq!(serde_json::to_value(&clear).unwrap(), serde_json::json!({"excluded_nodes": [""]}));
        let set = JobUpdate { excluded_nodes: Some(vec!["a".into(), "b".into()]), ..Default::default() };
        assert_eq!(serde_json::to_value(&set).unwrap(), serde_json::json!({"excluded_nodes": ["a", "b"]}));
        assert_eq!(serde_json::to_value(JobUpdate::default()).unwrap(), serde_json::json!({}));
    }
}
