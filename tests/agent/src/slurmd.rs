//! Runs one real `slurmd -Z` per slurmd pod inside the Slurm root.
//!
//! Each slurmd gets a private mount namespace with its own `/run/slurm`, as a container would:
//! `auth/slurm` listens on `/run/slurm/sack.socket`, and two slurmd sharing it fail to start.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};
use tokio::sync::Mutex;

struct Running {
    child: Child,
    conf: String,
    started: Instant,
}

/// A slurmd that dies is started again, but not sooner than this after its last start.
const RESTART_BACKOFF: Duration = Duration::from_secs(2);

/// The slurmd processes this agent started, by Slurm node name.
pub struct Supervisor {
    root: PathBuf,
    dir: PathBuf,
    port_base: u16,
    running: Mutex<HashMap<String, Running>>,
    ports: std::sync::Mutex<HashMap<String, u16>>,
}

impl Supervisor {
    pub fn new(root: PathBuf, dir: PathBuf, port_base: u16) -> anyhow::Result<Self> {
        std::fs::create_dir_all(&dir)?;
        Ok(Self { root, dir, port_base, running: Mutex::default(), ports: Default::default() })
    }

    /// A port for this node, the same for the agent's lifetime.
    fn port(&self, node: &str) -> u16 {
        let mut ports = self.ports.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let next = self.port_base + ports.len() as u16;
        *ports.entry(node.to_string()).or_insert(next)
    }

    fn pidfile(&self, node: &str) -> PathBuf {
        self.dir.join(format!("slurmd-{node}.pid"))
    }

    /// Kills slurmd left by a previous agent, found by pidfile.
    pub fn kill_stale(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|ext| ext != "pid") {
                continue;
            }
            let pid = std::fs::read_to_string(&path).ok().and_then(|text| text.trim().parse::<u32>().ok());
            if let Some(pid) = pid {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                if String::from_utf8_lossy(&cmdline).contains("slurmd") {
                    tracing::info!(pid, "killing a slurmd left by a previous agent");
                    signal(pid, "KILL");
                }
            }
            let _ = std::fs::remove_file(&path);
        }
    }

    /// Starts slurmd for `node` unless it runs already; true when a process was started.
    pub async fn ensure_running(&self, node: &str, conf: &str) -> anyhow::Result<bool> {
        let mut running = self.running.lock().await;
        if let Some(current) = running.get_mut(node) {
            if current.child.try_wait()?.is_none() || current.started.elapsed() < RESTART_BACKOFF {
                return Ok(false);
            }
            tracing::warn!(node, "slurmd exited; restarting it");
        }
        let conf = format!("{conf} Port={}", self.port(node));
        let log = OpenOptions::new().create(true).append(true).open(self.dir.join(format!("slurmd-{node}.log")))?;
        let script = r#"mkdir -p "$1/run/slurm" && mount -t tmpfs tmpfs "$1/run/slurm" && exec chroot "$1" /usr/bin/env SLURM_CONF=/etc/slurm/slurm.conf /usr/sbin/slurmd -D -Z -N "$2" --conf "$3""#;
        let child = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", script, "sh"])
            .arg(&self.root)
            .args([node, &conf])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        if let Some(pid) = child.id() {
            std::fs::write(self.pidfile(node), pid.to_string())?;
        }
        tracing::info!(node, conf, "started slurmd");
        running.insert(node.to_string(), Running { child, conf, started: Instant::now() });
        Ok(true)
    }

    /// Stops the slurmd of `node`: SIGTERM, then SIGKILL after `grace`.
    pub async fn stop(&self, node: &str, grace: Duration) {
        let Some(mut process) = self.running.lock().await.remove(node) else { return };
        if let Some(pid) = process.child.id() {
            signal(pid, "TERM");
        }
        if tokio::time::timeout(grace, process.child.wait()).await.is_err() {
            let _ = process.child.kill().await;
        }
        let _ = std::fs::remove_file(self.pidfile(node));
        tracing::info!(node, conf = process.conf, "stopped slurmd");
    }

    /// The nodes whose slurmd this agent runs.
    pub async fn nodes(&self) -> Vec<String> {
        self.running.lock().await.keys().cloned().collect()
    }

    pub async fn stop_all(&self) {
        for node in self.nodes().await {
            self.stop(&node, Duration::from_secs(5)).await;
        }
    }
}

fn signal(pid: u32, name: &str) {
    let _ = std::process::Command::new("kill").arg(format!("-{name}")).arg(pid.to_string()).status();
}

/// The dynamic node configuration a slurmd pod asks for: the argument after `--conf`.
pub fn conf_from_args(args: &[String]) -> Option<&str> {
    args.iter().position(|arg| arg == "--conf").and_then(|at| args.get(at + 1)).map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_conf_argument() {
        let args: Vec<String> = ["-Z", "--conf", "CPUs=4 Features=A100"].iter().map(|s| s.to_string()).collect();
        assert_eq!(conf_from_args(&args), Some("CPUs=4 Features=A100"));
        assert_eq!(conf_from_args(&args[..2]), None);
    }

    #[test]
    fn ports_are_stable_per_node() {
        let supervisor = Supervisor::new(PathBuf::from("/nonexistent"), std::env::temp_dir(), 100).unwrap();
        assert_eq!(supervisor.port("a"), 100);
        assert_eq!(supervisor.port("b"), 101);
        assert_eq!(supervisor.port("a"), 100);
    }
}
