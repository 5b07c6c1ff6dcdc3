//! What the bench reads over a window of time: the chart host's replicas (the leader, which does
//! the work, and a follower) and, as the reference, kube-scheduler, which holds the same pods in its
//! informers: resident memory, CPU, and the host's Slurm requests by call.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams};
use sunk_e2e::Cluster;
use sunk_e2e::process::{Usage, host_process};

const NODE_POLLS: &str = "sunk_slurm_node_polls_total";

/// A host replica: its pod, and its process on this machine.
pub struct Replica {
    pub pod: String,
    pub pid: u32,
}

pub struct Observed {
    pub leader: Replica,
    pub follower: Option<Replica>,
    /// kube-scheduler's process.
    pub reference: u32,
}

/// One window's figures.
pub struct Window {
    pub leader_rss_mib: f64,
    pub follower_rss_mib: Option<f64>,
    pub leader_cpu_ms_per_s: f64,
    pub reference_rss_mib: f64,
    pub reference_cpu_ms_per_s: f64,
    /// Slurm requests the leader sent, per second, by call.
    pub requests_per_s: BTreeMap<String, f64>,
    pub node_polls_per_s: f64,
}

impl Observed {
    /// The release's replicas, once one holds the Lease, and kube-scheduler.
    pub async fn find(cluster: &Cluster, release: &str) -> anyhow::Result<Self> {
        let leases: Api<Lease> = Api::namespaced(cluster.kube.clone(), &cluster.namespace);
        let holder = sunk_e2e::wait_for("a host to hold the Lease", Duration::from_secs(60), || async {
            leases
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find_map(|lease| lease.spec?.holder_identity)
        })
        .await?;
        let selector = format!("app.kubernetes.io/instance={release}");
        let pods = cluster.pods().list(&ListParams::default().labels(&selector)).await?;
        let replica = |pod: String| {
            let pid = host_process(&pod).ok_or_else(|| anyhow::anyhow!("no sunk process runs as pod {pod}"))?;
            anyhow::Ok(Replica { pod, pid })
        };
        let follower = pods.items.into_iter().filter_map(|pod| pod.metadata.name).find(|name| *name != holder);
        Ok(Self {
            leader: replica(holder)?,
            follower: follower.map(replica).transpose()?,
            reference: sunk_e2e::component_pid("kube-scheduler")?,
        })
    }

    /// Reads everything over `length`; memory is the highest of one reading a second.
    pub async fn window(&self, cluster: &Cluster, length: Duration) -> anyhow::Result<Window> {
        let usage = |pid: u32| Usage::of(pid).ok_or_else(|| anyhow::anyhow!("process {pid} is gone"));
        let metrics_before = self.leader_metrics(cluster).await?;
        let (leader_before, reference_before, start) =
            (usage(self.leader.pid)?, usage(self.reference)?, Instant::now());
        let mut highest = (0.0_f64, 0.0_f64, 0.0_f64);
        while start.elapsed() < length {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let follower = self.follower.as_ref().and_then(|replica| Usage::of(replica.pid)).unwrap_or_default();
            highest = (
                highest.0.max(usage(self.leader.pid)?.rss_mib),
                highest.1.max(follower.rss_mib),
                highest.2.max(usage(self.reference)?.rss_mib),
            );
        }
        let seconds = start.elapsed().as_secs_f64();
        let (leader_after, reference_after) = (usage(self.leader.pid)?, usage(self.reference)?);
        let metrics_after = self.leader_metrics(cluster).await?;
        let rate = |name: &str| (counter(&metrics_after, name) - counter(&metrics_before, name)) / seconds;
        let mut requests_per_s = BTreeMap::new();
        for call in calls(&metrics_after) {
            let series = format!("sunk_slurm_requests_total{{call=\"{call}\"}}");
            requests_per_s.insert(call, rate(&series));
        }
        Ok(Window {
            leader_rss_mib: highest.0,
            follower_rss_mib: self.follower.as_ref().map(|_| highest.1),
            leader_cpu_ms_per_s: (leader_after.cpu_seconds - leader_before.cpu_seconds) * 1000.0 / seconds,
            reference_rss_mib: highest.2,
            reference_cpu_ms_per_s: (reference_after.cpu_seconds - reference_before.cpu_seconds) * 1000.0 / seconds,
            requests_per_s,
            node_polls_per_s: rate(NODE_POLLS),
        })
    }

    /// Until the leader has polled Slurm's nodes `more` times from now (so that its cache holds what
    /// Slurm held when called).
    pub async fn polled(&self, cluster: &Cluster, more: f64) -> anyhow::Result<()> {
        let polls = counter(&self.leader_metrics(cluster).await?, NODE_POLLS) + more;
        sunk_e2e::wait_for("the leader's node polls", Duration::from_secs(60), || async {
            (counter(&self.leader_metrics(cluster).await.ok()?, NODE_POLLS) >= polls).then_some(())
        })
        .await
    }

    /// The leader's /metrics, through the API server's proxy to its pod.
    pub async fn leader_metrics(&self, cluster: &Cluster) -> anyhow::Result<String> {
        let path = format!("/api/v1/namespaces/{}/pods/{}:8080/proxy/metrics", cluster.namespace, self.leader.pod);
        Ok(cluster.kube.request_text(http::Request::get(path).body(Vec::new())?).await?)
    }
}

/// What a histogram of the host's slurmrestd requests (`sunk_slurm_request_seconds`, ...) holds for
/// one call.
#[derive(Debug, Default, Clone, Copy)]
pub struct Timing {
    pub count: f64,
    pub sum_s: f64,
    pub over_1s: f64,
}

impl Timing {
    /// The series of `histogram` with `label` (e.g. `call="node update"`).
    pub fn read(metrics: &str, histogram: &str, label: &str) -> Self {
        let value = |suffix: &str, le: Option<&str>| {
            metrics
                .lines()
                .filter(|line| line.starts_with(&format!("{histogram}_{suffix}{{")) && line.contains(label))
                .filter(|line| le.is_none_or(|le| line.contains(&format!("le=\"{le}\""))))
                .find_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
                .unwrap_or_default()
        };
        let count = value("count", None);
        Self { count, sum_s: value("sum", None), over_1s: count - value("bucket", Some("1.0")) }
    }

    /// What happened between two readings.
    pub fn since(self, before: Self) -> Self {
        Self {
            count: self.count - before.count,
            sum_s: self.sum_s - before.sum_s,
            over_1s: self.over_1s - before.over_1s,
        }
    }

    pub fn mean_ms(self) -> f64 {
        self.sum_s * 1000.0 / self.count.max(1.0)
    }
}

/// A counter's value (0 when it has no sample yet).
fn counter(metrics: &str, series: &str) -> f64 {
    metrics.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok()).unwrap_or_default()
}

/// The `call` labels of `sunk_slurm_requests_total`.
fn calls(metrics: &str) -> Vec<String> {
    metrics
        .lines()
        .filter_map(|line| line.strip_prefix("sunk_slurm_requests_total{call=\"")?.split_once('"'))
        .map(|(call, _)| call.to_owned())
        .collect()
}
