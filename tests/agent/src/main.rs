//! The test agent: plays the kubelet on sunk's local cluster, where no container runtime exists.
//!
//! It keeps the fake Nodes Ready, marks pods bound to them Running, runs a real `slurmd -Z` for
//! every slurmd pod, and completes the deletion of bound pods, as a kubelet would.

mod nodes;
mod pods;
mod slurmd;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use kube::config::{KubeConfigOptions, Kubeconfig};

#[derive(Parser)]
#[command(name = "sunk-test-agent", about = "Plays the kubelet for sunk's local test cluster")]
struct Args {
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: PathBuf,
    /// The Debian root holding slurmd.
    #[arg(long)]
    slurm_root: PathBuf,
    /// The cluster's state directory; the agent keeps its pidfiles and logs in `<dir>/agent`.
    #[arg(long)]
    state_dir: PathBuf,
    /// slurmd ports are handed out from here upwards.
    #[arg(long, default_value_t = 17000)]
    slurmd_port_base: u16,
    #[arg(long, default_value_t = 10)]
    heartbeat_seconds: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_env_filter(std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into())).init();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = Args::parse();
    let config = kube::Config::from_custom_kubeconfig(
        Kubeconfig::read_from(&args.kubeconfig).context("reading the kubeconfig")?,
        &KubeConfigOptions::default(),
    )
    .await?;
    let client = kube::Client::try_from(config)?;

    let supervisor =
        Arc::new(slurmd::Supervisor::new(args.slurm_root, args.state_dir.join("agent"), args.slurmd_port_base)?);
    supervisor.kill_stale();

    tokio::spawn(nodes::heartbeat(client.clone(), Duration::from_secs(args.heartbeat_seconds)));
    let agent = pods::run(client, supervisor.clone());
    tokio::select! {
        result = agent => result?,
        _ = tokio::signal::ctrl_c() => {}
        _ = terminated() => {}
    }
    tracing::info!("stopping every slurmd");
    supervisor.stop_all().await;
    Ok(())
}

async fn terminated() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut signal) => {
            signal.recv().await;
        }
        Err(_) => futures::future::pending().await,
    }
}
