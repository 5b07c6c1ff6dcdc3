//! The test agent: plays the kubelet on sunk's local cluster, where no container runtime exists.
//!
//! It keeps the fake Nodes (label `sunk.dev/fake-node=true`) Ready, marks pods bound to them
//! Running, runs a real `slurmd -Z` for every slurmd pod (label `sunk.dev/slurm-node=<name>`), and
//! completes the deletion of bound pods, as a kubelet would.

mod nodes;
mod pods;
mod slurmd;
mod status;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::signal::unix::{SignalKind, signal};
use tracing_subscriber::EnvFilter;

/// How long slurmd get to stop when the agent itself stops (tests/cluster/down.sh kills the
/// agent 5 s after its SIGTERM).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// How long running reconciliations may go on after SIGTERM/SIGINT.
const RECONCILE_DRAIN: Duration = Duration::from_secs(1);

#[derive(Parser, Debug)]
#[command(name = "sunk-test-agent", version, about = "Plays the kubelet for sunk's local test cluster")]
struct Args {
    /// Kubeconfig file. Without it the usual inference applies ($KUBECONFIG, ~/.kube/config,
    /// in-cluster).
    #[arg(long, env = "SUNK_AGENT_KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// The Debian root holding slurmd (Slurm's config at <root>/etc/slurm/slurm.conf).
    #[arg(long, env = "SLURM_ROOT")]
    slurm_root: PathBuf,
    /// The cluster's state directory; the agent keeps slurmd pidfiles and logs in <dir>/agent.
    #[arg(long, env = "SUNK_STATE")]
    state_dir: PathBuf,
    /// slurmd ports are handed out from here upwards, one per Slurm node name.
    #[arg(long, env = "SLURMD_PORT_BASE", default_value_t = 17000)]
    slurmd_port_base: u16,
    /// Seconds between two Node heartbeats.
    #[arg(long, env = "SUNK_AGENT_HEARTBEAT_SECONDS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..))]
    heartbeat_seconds: u64,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    // First of all, so that a SIGTERM during start-up is a clean shutdown too.
    let shutdown = shutdown_signal().context("installing signal handlers")?;
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let _ = rustls::crypto::ring::default_provider().install_default();

    let config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path).with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?
        }
        None => kube::Config::infer().await.context("finding a kubeconfig")?,
    };
    let client = kube::Client::try_from(config)?;

    let supervisor = Arc::new(slurmd::Supervisor::new(
        args.slurm_root.clone(),
        args.state_dir.join("agent"),
        args.slurmd_port_base,
    )?);
    supervisor.kill_stale().await;
    tracing::info!(
        slurm_root = %args.slurm_root.display(),
        dir = %args.state_dir.join("agent").display(),
        port_base = args.slurmd_port_base,
        "sunk test agent starting"
    );

    let (nodes, watch_nodes) = nodes::watch(client.clone());
    tokio::spawn(watch_nodes);
    tokio::select! {
        ready = nodes.wait_until_ready() => ready.context("the Node watch ended")?,
        _ = shutdown.clone() => return Ok(()),
    }
    tracing::info!(nodes = nodes.len(), "fake Nodes listed");
    tokio::spawn(nodes::heartbeat(client.clone(), nodes.clone(), Duration::from_secs(args.heartbeat_seconds)));

    let controller = pods::run(client, nodes, supervisor.clone(), shutdown.clone());
    tokio::pin!(controller);
    let ended_early = tokio::select! {
        _ = &mut controller => true,
        _ = shutdown.clone() => {
            let _ = tokio::time::timeout(RECONCILE_DRAIN, &mut controller).await;
            false
        }
    };
    tracing::info!("stopping every slurmd");
    supervisor.stop_all(SHUTDOWN_GRACE).await;
    anyhow::ensure!(!ended_early, "the pod controller ended unexpectedly");
    tracing::info!("sunk test agent stopped");
    Ok(())
}

/// Resolves on the first SIGTERM or SIGINT. The handlers are installed at once.
fn shutdown_signal() -> std::io::Result<Shared<BoxFuture<'static, ()>>> {
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => tracing::info!("SIGTERM: shutting down"),
            _ = interrupt.recv() => tracing::info!("SIGINT: shutting down"),
        }
    }
    .boxed()
    .shared())
}
