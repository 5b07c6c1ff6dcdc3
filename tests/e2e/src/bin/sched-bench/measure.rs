//! Creating pods and timing them to their binding, the same way for both schedulers: the instant the
//! create call is sent, and the instant a watch of the namespace first shows the pod with a node.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use sunk_e2e::{BUSYBOX, wait_for};

use super::fleet::BENCH_LABEL;
use super::stats::Trip;

/// The bench pods' priority: above the Slurm queue's jobs (see `queue`).
const PRIORITY: i32 = 1000;

/// When each pod of the namespace was first seen bound, by name.
#[derive(Clone, Default)]
pub struct Bindings(Arc<Mutex<HashMap<String, Instant>>>);

impl Bindings {
    /// Starts watching the namespace's pods.
    pub fn watch(kube: &Client, namespace: &str) -> Self {
        let bindings = Bindings::default();
        let seen = bindings.clone();
        let pods: Api<Pod> = Api::namespaced(kube.clone(), namespace);
        let stream = watcher(pods, watcher::Config::default().labels("sunk.dev/bench-pod")).applied_objects();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Ok(Some(pod)) = stream.try_next().await {
                if pod.spec.as_ref().and_then(|spec| spec.node_name.as_ref()).is_some() {
                    seen.lock().entry(pod.name_any()).or_insert_with(Instant::now);
                }
            }
        });
        bindings
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn of(&self, name: &str) -> Option<Instant> {
        self.lock().get(name).copied()
    }
}

/// The PriorityClass of every bench pod, named after the namespace; deleted when dropped, so a run
/// that fails half-way leaves no cluster-wide object behind (as `Fleet` and `Queue` clean up theirs).
pub struct BenchPriorityClass(String);

impl BenchPriorityClass {
    pub async fn create(kube: &Client, namespace: &str) -> anyhow::Result<Self> {
        let class: PriorityClass = serde_json::from_value(serde_json::json!({
            "metadata": {"name": namespace}, "value": PRIORITY, "preemptionPolicy": "Never",
        }))?;
        Api::<PriorityClass>::all(kube.clone()).create(&PostParams::default(), &class).await?;
        // The Priority admission plugin reads PriorityClasses from its own cache, which may not have
        // this one yet: a pod naming it is refused until then. A dry run tells when it has.
        let pods = Api::<Pod>::namespaced(kube.clone(), namespace);
        let probe = bench_pod("priority-class-probe", "default-scheduler", namespace)?;
        wait_for("the bench PriorityClass to be admitted", Duration::from_secs(30), || async {
            pods.create(&PostParams { dry_run: true, ..Default::default() }, &probe).await.ok().map(drop)
        })
        .await?;
        Ok(Self(namespace.to_string()))
    }
}

impl Drop for BenchPriorityClass {
    fn drop(&mut self) {
        let _ = sunk_e2e::kubectl(&["delete", "priorityclass", &self.0, "--wait=false"]).output();
    }
}

/// A bench pod: 1 CPU, 64 MiB, on the fake Nodes only, for `scheduler`.
pub fn bench_pod(name: &str, scheduler: &str, namespace: &str) -> anyhow::Result<Pod> {
    let mut pod = bench_pod_anywhere(name, scheduler, namespace)?;
    let selector = [(BENCH_LABEL.0.to_string(), BENCH_LABEL.1.to_string())].into();
    pod.spec.as_mut().expect("a spec").node_selector = Some(selector);
    Ok(pod)
}

/// The same pod on any Node with room.
pub fn bench_pod_anywhere(name: &str, scheduler: &str, namespace: &str) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": {"sunk.dev/bench-pod": "true"}},
        "spec": {
            "schedulerName": scheduler,
            "priorityClassName": namespace,
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "main", "image": BUSYBOX, "command": ["sleep", "3600"],
                "resources": {"requests": {"cpu": "1", "memory": "64Mi"}}
            }]
        }
    }))?)
}

/// Creates `count` pods `<prefix>-<n>` with `creators` create calls in flight; waits until all are bound.
pub async fn burst(
    kube: &Client,
    namespace: &str,
    bindings: &Bindings,
    scheduler: &str,
    prefix: &str,
    count: usize,
    creators: usize,
) -> anyhow::Result<Vec<Trip>> {
    let api: Api<Pod> = Api::namespaced(kube.clone(), namespace);
    let names: Vec<String> = (0..count).map(|index| format!("{prefix}-{index}")).collect();
    let sent: Vec<(String, Instant)> = futures::stream::iter(names.clone())
        .map(|name| {
            let api = api.clone();
            async move {
                let pod = bench_pod(&name, scheduler, namespace)?;
                let sent = Instant::now();
                api.create(&PostParams::default(), &pod).await?;
                anyhow::Ok((name, sent))
            }
        })
        .buffer_unordered(creators)
        .try_collect()
        .await?;
    collect(bindings, sent, Duration::from_secs(600)).await
}

/// Creates `count` pods one at a time, each waited on until bound.
pub async fn one_by_one(
    kube: &Client,
    namespace: &str,
    bindings: &Bindings,
    scheduler: &str,
    prefix: &str,
    count: usize,
) -> anyhow::Result<Vec<Trip>> {
    let api: Api<Pod> = Api::namespaced(kube.clone(), namespace);
    let mut trips = Vec::with_capacity(count);
    for index in 0..count {
        trips.push(
            create_and_bind(&api, bindings, bench_pod(&format!("{prefix}-{index}"), scheduler, namespace)?).await?,
        );
    }
    Ok(trips)
}

/// Creates one pod and waits until it is bound.
pub async fn create_and_bind(api: &Api<Pod>, bindings: &Bindings, pod: Pod) -> anyhow::Result<Trip> {
    let name = pod.name_any();
    let sent = Instant::now();
    api.create(&PostParams::default(), &pod).await?;
    let mut trips = collect(bindings, vec![(name, sent)], Duration::from_secs(60)).await?;
    Ok(trips.remove(0))
}

async fn collect(bindings: &Bindings, sent: Vec<(String, Instant)>, timeout: Duration) -> anyhow::Result<Vec<Trip>> {
    wait_for(&format!("{} pods to be bound", sent.len()), timeout, || async {
        sent.iter()
            .map(|(name, sent)| Some(Trip { sent: *sent, bound: bindings.of(name)? }))
            .collect::<Option<Vec<_>>>()
    })
    .await
}

/// Deletes every bench pod of the namespace at once and waits until they are gone.
pub async fn clear(kube: &Client, namespace: &str) -> anyhow::Result<()> {
    let api: Api<Pod> = Api::namespaced(kube.clone(), namespace);
    let params = DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
    let selected = ListParams::default().labels("sunk.dev/bench-pod");
    api.delete_collection(&params, &selected).await?;
    wait_for("the bench pods to be gone", Duration::from_secs(300), || async {
        api.list(&selected).await.ok()?.items.is_empty().then_some(())
    })
    .await
}
