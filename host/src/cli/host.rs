//! `sunk host`: the long-running controller.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use futures::FutureExt;
use futures::future::BoxFuture;

use crate::delivery::{self, Decision};
use crate::nodeset::{self, ClusterSettings};
use crate::policy::{self, FailureModes, OnFailure, Policies};
use crate::slurm::{NodeCache, NodeCacheConfig, SlurmClient, TokenSigner};
use crate::{http, scheduler};

#[derive(Args)]
pub struct HostArgs {
    /// kubeconfig to use; without it, KUBECONFIG, ~/.kube/config or the in-cluster service account.
    #[arg(long, env = "SUNK_KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// slurmrestd's base URL.
    #[arg(long, env = "SUNK_SLURM_URL", default_value = "http://127.0.0.1:6820")]
    slurm_url: String,
    /// The cluster's JWT key (AuthAltParameters=jwt_key=...); the host signs its own tokens with it.
    #[arg(long, env = "SUNK_SLURM_JWT_KEY")]
    slurm_jwt_key: PathBuf,
    /// The Slurm user the host acts as. Placeholders carry an admin comment, so it must be an administrator.
    #[arg(long, env = "SUNK_SLURM_USER", default_value = "root")]
    slurm_user: String,
    /// Pods with this `spec.schedulerName` are scheduled through Slurm.
    #[arg(long, env = "SUNK_SCHEDULER_NAME", default_value = "sunk")]
    scheduler_name: String,
    /// How often Slurm's job list is polled, in milliseconds.
    #[arg(long, env = "SUNK_POLL_INTERVAL_MS", default_value_t = 500)]
    poll_interval_ms: u64,
    /// Slurm's KillWait in seconds; pods must have a termination grace period at least 5 s shorter.
    #[arg(long, env = "SUNK_SLURM_KILL_WAIT", default_value_t = 30)]
    slurm_kill_wait: u32,
    /// Account for placeholder jobs whose pod names none.
    #[arg(long, env = "SUNK_DEFAULT_ACCOUNT")]
    default_account: Option<String>,
    /// Partition for placeholder jobs whose pod names none (Slurm's default partition when unset).
    #[arg(long, env = "SUNK_DEFAULT_PARTITION")]
    default_partition: Option<String>,
    /// Where /metrics and /healthz are served.
    #[arg(long, env = "SUNK_HTTP_ADDR", default_value = "0.0.0.0:8080")]
    http_addr: SocketAddr,
    /// The namespace whose PolicyModules (and their ConfigMaps and Secrets) the host loads; by default
    /// the host's own namespace in a cluster, else `default`.
    #[arg(long, env = "SUNK_POLICY_NAMESPACE")]
    policy_namespace: Option<String>,
    /// A directory of policy modules (`job-mapper.wasm`, `preemption.wasm`, `drain.wasm`, each with an
    /// optional `<decision>.config`), polled for changes. PolicyModules take precedence over it.
    #[arg(long, env = "SUNK_POLICY_DIR")]
    policy_dir: Option<PathBuf>,
    /// Decision points that fail closed: when their module fails, the decision fails (and is retried)
    /// instead of falling back to the bundled default. Repeatable: job-mapper, preemption, drain.
    #[arg(long = "policy-fail-closed", env = "SUNK_POLICY_FAIL_CLOSED", value_delimiter = ',')]
    fail_closed: Vec<Decision>,
    /// Runs the pod scheduler (pods whose schedulerName is --scheduler-name). `--scheduler=false`
    /// turns it off, e.g. for a host that only keeps NodeSets.
    #[arg(long, env = "SUNK_SCHEDULER", default_value_t = true, action = clap::ArgAction::Set)]
    scheduler: bool,
    /// Runs the NodeSet controller (slurmd pods on the Nodes NodeSets select). `--nodeset-controller=false`
    /// turns it off.
    #[arg(long, env = "SUNK_NODESET_CONTROLLER", default_value_t = true, action = clap::ArgAction::Set)]
    nodeset_controller: bool,
    /// slurmctld's `host:port` that slurmd pods fetch their configuration from (`--conf-server`);
    /// default: the host of --slurm-url, port 6817.
    #[arg(long, env = "SUNK_SLURMCTLD_ADDRESS")]
    slurmctld_address: Option<String>,
    /// The Secret (key `slurm.key`) with the cluster's auth key, mounted into slurmd pods of NodeSets
    /// that name none.
    #[arg(long, env = "SUNK_SLURM_KEY_SECRET", default_value = "slurm-key")]
    slurm_key_secret: String,
    /// Only pods of these namespaces are scheduled (a comma list); all namespaces by default. With
    /// exactly one, the host watches only that namespace's pods.
    #[arg(long, env = "SUNK_WATCH_NAMESPACES", value_delimiter = ',')]
    watch_namespaces: Vec<String>,
    /// Places a pod at once when Slurm has room (an immediate allocation, bound in milliseconds)
    /// before falling back to a queued placeholder. Needs slurm.conf's InactiveLimit=0 (the default).
    #[arg(long, env = "SUNK_FAST_PATH", default_value_t = false, action = clap::ArgAction::Set)]
    fast_path: bool,
    /// Only the NodeSets of this namespace; all namespaces by default.
    #[arg(long, env = "SUNK_NODESET_NAMESPACE")]
    nodeset_namespace: Option<String>,
}

/// The namespace a pod's service account lives in, when running in a cluster.
const SERVICE_ACCOUNT_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

pub fn run(args: HostArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(serve(args))
}

async fn serve(args: HostArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.scheduler || args.nodeset_controller,
        "--scheduler=false and --nodeset-controller=false leave the host nothing to do"
    );
    let key = std::fs::read(&args.slurm_jwt_key)
        .with_context(|| format!("--slurm-jwt-key {}: cannot read the JWT key", args.slurm_jwt_key.display()))?;
    let signer = TokenSigner::new(&key, args.slurm_user.clone(), Duration::from_secs(900));
    let slurm = SlurmClient::new(&args.slurm_url, signer)?;
    slurm.ping().await.with_context(|| format!("--slurm-url {}: slurmrestd does not answer", args.slurm_url))?;
    let client = crate::kube::connect(args.kubeconfig.as_deref()).await?;
    let policies = Arc::new(Policies::bundled(failure_modes(&args.fail_closed))?);
    tracing::info!(digest = policies.job_mapper.live().module.digest(), "bundled policies loaded");

    let mut registry = prometheus_client::registry::Registry::default();
    policies.metrics.register(&mut registry);
    let scheduler_metrics = scheduler::SchedulerMetrics::default();
    scheduler_metrics.register(&mut registry);
    http::serve(args.http_addr, registry).await?;

    let namespace = args.policy_namespace.clone().unwrap_or_else(own_namespace);
    tokio::spawn(delivery::run(client.clone(), namespace, policies.clone()));
    if let Some(dir) = args.policy_dir.clone() {
        tokio::spawn(delivery::watch_directory(dir, policies.clone()));
    }
    let poll_interval = Duration::from_millis(args.poll_interval_ms.max(50));
    // The controllers this host runs, side by side; the first to fail ends the host.
    let mut controllers: Vec<BoxFuture<'static, anyhow::Result<()>>> = Vec::new();
    if args.nodeset_controller {
        let cluster = ClusterSettings {
            conf_server: conf_server(args.slurmctld_address.as_deref(), &args.slurm_url)?,
            slurm_key_secret: args.slurm_key_secret.clone(),
        };
        let slurm_nodes = NodeCache::new(NodeCacheConfig::every(poll_interval));
        tokio::spawn(slurm_nodes.clone().run(slurm.clone()));
        let config = nodeset::Config { cluster, namespace: args.nodeset_namespace.clone() };
        controllers.push(nodeset::run(client.clone(), slurm.clone(), slurm_nodes, policies.clone(), config).boxed());
    }
    if args.scheduler {
        // Read once: a partition added later needs a host restart before pods may name it.
        let partitions = slurm.partitions().await.context("listing Slurm partitions")?;
        let config = scheduler::Config {
            scheduler_name: args.scheduler_name,
            poll_interval,
            cluster: policy::Cluster {
                partitions,
                default_partition: args.default_partition,
                default_account: args.default_account,
                kill_wait_seconds: args.slurm_kill_wait,
            },
            metrics: scheduler_metrics,
            scope: scheduler::Scope::new(&args.watch_namespaces),
            fast_path: args.fast_path,
        };
        controllers.push(scheduler::run(client, slurm, policies, config).boxed());
    }
    futures::future::try_join_all(controllers).await.map(drop)
}

/// `--slurmctld-address`, or the host of slurmrestd's URL with slurmctld's default port.
fn conf_server(address: Option<&str>, slurm_url: &str) -> anyhow::Result<String> {
    if let Some(address) = address {
        return Ok(address.to_owned());
    }
    let url = reqwest::Url::parse(slurm_url).with_context(|| format!("--slurm-url {slurm_url} is not a URL"))?;
    let host = url.host_str().with_context(|| format!("--slurm-url {slurm_url} names no host"))?;
    Ok(format!("{host}:6817"))
}

fn failure_modes(fail_closed: &[Decision]) -> FailureModes {
    let mode = |decision| if fail_closed.contains(&decision) { OnFailure::FailClosed } else { OnFailure::Fallback };
    FailureModes {
        job_mapper: mode(Decision::JobMapper),
        preemption: mode(Decision::Preemption),
        drain: mode(Decision::Drain),
    }
}

fn own_namespace() -> String {
    std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE)
        .map(|ns| ns.trim().to_owned())
        .unwrap_or_else(|_| "default".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_conf_server_defaults_to_slurmrestds_host() {
        assert_eq!(conf_server(None, "http://10.0.0.5:6820").unwrap(), "10.0.0.5:6817");
        assert_eq!(conf_server(Some("ctld:7000"), "http://x:1").unwrap(), "ctld:7000");
        assert!(conf_server(None, "not a url").is_err());
    }
}
