//! The steady work of a chaos run: 1-CPU pods that run a few seconds (singles, bursts of three alike
//! that the host submits as one job array, two-pod gangs, and preemptors, whose PriorityClass ranks
//! them above everything else), some deleted while they run, and Slurm batch jobs beside them. Pods
//! that succeeded are deleted, as a Job controller's cleanup would.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams};
use sunk_e2e::{SlurmJob, node_name, pod, wait_for};

use crate::random::Random;
use crate::world::{POOL_LABEL, World};

/// The label every pod of the workload carries.
pub const WORKLOAD: &str = "chaos.sunk.dev/workload";
/// New work comes while fewer than this many of the workload's pods exist (the pool runs three).
const MAX_PODS: usize = 6;
/// Pods of a burst, created together (alike: the host submits them as one job array).
pub const BURST: usize = 3;
/// At most this many batch jobs are live at once.
const MAX_BATCH: usize = 1;

/// A pod the workload made, as last seen.
pub struct Tracked {
    pub uid: String,
    /// In a two-pod gang.
    pub gang: bool,
    /// Deleted by the workload (done, or deleted while running).
    pub deleted: bool,
    pub bound: bool,
    /// Whether the workload will delete it once it runs.
    doomed: bool,
}

#[derive(Default, Debug, Clone)]
pub struct Counts {
    pub pods: usize,
    pub gangs: usize,
    pub bursts: usize,
    pub preemptors: usize,
    /// Distinct job arrays the samples saw standing for the run's pods.
    pub arrays: usize,
    pub bound: usize,
    pub succeeded: usize,
    pub deleted_running: usize,
    /// Pods the kubelet refused or that failed (not an invariant: reported), by reason.
    pub failed_because: std::collections::BTreeMap<String, usize>,
    pub batch_jobs: usize,
}

pub struct Workload {
    next: u64,
    pub pods: HashMap<String, Tracked>,
    /// Batch jobs submitted, by id; the live ones are cancelled when the run ends.
    pub batch: Vec<SlurmJob>,
    counts: Counts,
    arrays: std::collections::HashSet<u64>,
}

impl Workload {
    pub fn new() -> Self {
        Self {
            next: 0,
            pods: HashMap::new(),
            batch: Vec::new(),
            counts: Counts::default(),
            arrays: std::collections::HashSet::new(),
        }
    }

    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// Notes the job arrays a sample saw standing for the run's pods.
    pub fn saw_arrays(&mut self, arrays: &[u64]) {
        self.arrays.extend(arrays);
        self.counts.arrays = self.arrays.len();
    }

    /// One step: notes what became of the pods, cleans up, and tops the work up.
    pub async fn tick(&mut self, world: &World, random: &mut Random) {
        // A failed listing (the API server restarting) skips the step; the next one catches up.
        let Ok(listed) = world.cluster.pods().list(&ListParams::default().labels(WORKLOAD)).await else { return };
        for seen in &listed.items {
            self.observe(world, seen).await;
        }
        let live = listed.items.iter().filter(|pod| pod.metadata.deletion_timestamp.is_none()).count();
        if live < MAX_PODS {
            if random.percent(20) {
                let _ = self.create_gang(world).await;
            } else if random.percent(20) {
                // May go past MAX_PODS by BURST - 1: the pool is seldom emptier than that.
                let _ = self.create_burst(world, random.between((4, 15))).await;
            } else if random.percent(10) {
                let _ = self.create_preemptor(world, random.between((4, 15))).await;
            } else {
                let doomed = random.percent(15);
                let _ = self.create_single(world, doomed, random.between((4, 15))).await;
            }
        }
        self.top_up_batch(random);
    }

    async fn observe(&mut self, world: &World, seen: &Pod) {
        let name = seen.name_any();
        let Some(tracked) = self.pods.get_mut(&name) else { return };
        if !tracked.bound && node_name(seen).is_some() {
            tracked.bound = true;
            self.counts.bound += 1;
        }
        let phase = seen.status.as_ref().and_then(|status| status.phase.as_deref()).unwrap_or_default();
        let running = phase == "Running";
        let over = matches!(phase, "Succeeded" | "Failed");
        if tracked.deleted || !(over || (running && tracked.doomed)) {
            return;
        }
        if world.cluster.delete_pod(&name).await.is_ok() {
            tracked.deleted = true;
            match phase {
                "Succeeded" => self.counts.succeeded += 1,
                "Failed" => {
                    let status = seen.status.as_ref();
                    let reason = status.and_then(|status| status.reason.clone()).unwrap_or_else(|| "no reason".into());
                    *self.counts.failed_because.entry(reason).or_default() += 1;
                }
                _ => self.counts.deleted_running += 1,
            }
        }
    }

    async fn create_single(&mut self, world: &World, doomed: bool, seconds: u64) -> anyhow::Result<()> {
        self.next += 1;
        let name = format!("single-{}", self.next);
        self.create(world, workload_pod(world, &name, seconds), false, doomed).await
    }

    async fn create_preemptor(&mut self, world: &World, seconds: u64) -> anyhow::Result<()> {
        self.next += 1;
        let mut pod = workload_pod(world, &format!("preemptor-{}", self.next), seconds);
        pod["spec"]["priorityClassName"] = world.preemptor_class.name.clone().into();
        self.create(world, pod, false, false).await?;
        self.counts.preemptors += 1;
        Ok(())
    }

    async fn create_burst(&mut self, world: &World, seconds: u64) -> anyhow::Result<()> {
        self.next += 1;
        for member in 0..BURST {
            let name = format!("burst-{}-{member}", self.next);
            self.create(world, workload_pod(world, &name, seconds), false, false).await?;
        }
        self.counts.bursts += 1;
        Ok(())
    }

    async fn create_gang(&mut self, world: &World) -> anyhow::Result<()> {
        self.next += 1;
        let group = format!("gang-{}", self.next);
        for member in 0..2 {
            let mut pod = workload_pod(world, &format!("{group}-{member}"), 8);
            pod["metadata"]["labels"]["sunk.dev/pod-group"] = group.clone().into();
            pod["metadata"]["annotations"] = serde_json::json!({"sunk.dev/pod-group-size": "2"});
            self.create(world, pod, true, false).await?;
        }
        self.counts.gangs += 1;
        Ok(())
    }

    async fn create(&mut self, world: &World, pod: serde_json::Value, gang: bool, doomed: bool) -> anyhow::Result<()> {
        let created = world.cluster.create_pod(pod).await?;
        let tracked = Tracked { uid: created.uid().unwrap_or_default(), gang, deleted: false, bound: false, doomed };
        self.pods.insert(created.name_any(), tracked);
        self.counts.pods += 1;
        Ok(())
    }

    fn top_up_batch(&mut self, random: &mut Random) {
        // One is submitted only while fewer than MAX_BATCH are live, so only the newest can still be.
        let live = self.batch.iter().rev().take(MAX_BATCH).filter(|job| batch_job_live(job)).count();
        if live >= MAX_BATCH || !random.percent(30) {
            return;
        }
        let seconds = random.between((5, 20)).to_string();
        let wrap = format!("--wrap=sleep {seconds}");
        if let Ok(job) = SlurmJob::submit(&["-p", "batch", "-N1", "-n1", "-t", "2", "-o", "/dev/null", &wrap]) {
            self.batch.push(job);
            self.counts.batch_jobs += 1;
        }
    }

    /// Ends the work: every pod deleted and gone from its kubelet. Batch jobs are left to finish.
    pub async fn stop_and_clean(&mut self, world: &World) -> anyhow::Result<()> {
        let pods = world.cluster.pods();
        let listed = pods.list(&ListParams::default().labels(WORKLOAD)).await?;
        for pod in listed.items {
            if let Some(tracked) = self.pods.get_mut(&pod.name_any()) {
                tracked.deleted = true;
            }
            let _ = pods.delete(&pod.name_any(), &DeleteParams::default()).await;
        }
        wait_for("the workload's pods to be gone", Duration::from_secs(120), || async {
            let left = pods.list(&ListParams::default().labels(WORKLOAD)).await.ok()?;
            left.items.is_empty().then_some(())
        })
        .await
    }
}

fn batch_job_live(job: &SlurmJob) -> bool {
    sunk_e2e::in_slurm_root(&["squeue", "-h", "-j", &job.0, "-o", "%T"])
        .map(|state| matches!(state.trim(), "PENDING" | "RUNNING" | "CONFIGURING" | "COMPLETING"))
        .unwrap_or(false)
}

/// A 1-CPU pod of the pool that runs `seconds` and succeeds (leaving at once on SIGTERM).
fn workload_pod(world: &World, name: &str, seconds: u64) -> serde_json::Value {
    let mut pod = pod(name, "1", "64Mi");
    pod["metadata"]["labels"] = serde_json::json!({WORKLOAD: "true"});
    pod["spec"]["restartPolicy"] = "Never".into();
    pod["spec"]["nodeSelector"] = serde_json::json!({POOL_LABEL: world.cluster.namespace});
    pod["spec"]["containers"][0]["command"] =
        serde_json::json!(["sh", "-c", format!("trap 'exit 0' TERM; sleep {seconds} & wait")]);
    pod
}
