//! The local cluster's processes as a supervisor sees them: frozen and thawed, killed and started
//! again with the same command (tests/cluster/lib.sh records each component's pid and command under
//! `pids/`).

use std::fs::OpenOptions;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::{signal, state_dir, wait_for};

/// Stops the component tests/cluster started under `name` (`kube-apiserver`, `slurmctld`,
/// `slurmrestd`) with `signal` (`KILL`, as a crash would; `TERM`, as an upgrade would), waits until
/// it is gone, and starts it again with its command, its output appended to its log. Does not wait
/// for it to answer.
pub async fn restart_component(name: &str, signal_name: &str) -> anyhow::Result<()> {
    let pid = pid_of(name)?;
    let command = std::fs::read_to_string(record(name, "cmd"))?;
    signal(pid, signal_name)?;
    wait_for(
        &format!("{name} (pid {pid}) to be gone"),
        Duration::from_secs(30),
        || async move { gone(pid).then_some(()) },
    )
    .await?;
    let log =
        OpenOptions::new().create(true).append(true).open(state_dir().join("logs").join(format!("{name}.log")))?;
    let child = Command::new("setsid")
        .args(["bash", "-c", &format!("exec {command}")])
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
    std::fs::write(record(name, "pid"), child.id().to_string())?;
    Ok(())
}

/// A local cluster process stopped in its tracks (SIGSTOP) until the guard is dropped (SIGCONT).
pub struct Frozen(u32);

impl Frozen {
    /// Freezes the component tests/cluster started under this name (`slurmrestd`, `kubelet-kube-node-1`).
    pub fn component(name: &str) -> anyhow::Result<Self> {
        Self::process(pid_of(name)?)
    }

    /// Freezes the process `pid` (a host a test started, say).
    pub fn process(pid: u32) -> anyhow::Result<Self> {
        signal(pid, "STOP")?;
        Ok(Frozen(pid))
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = signal(self.0, "CONT");
    }
}

/// What tests/cluster/lib.sh recorded of the component (`pid`, `cmd`).
fn record(name: &str, what: &str) -> PathBuf {
    state_dir().join("pids").join(format!("{name}.{what}"))
}

/// The process of the component tests/cluster started under `name` (`kube-scheduler`, `slurmctld`).
pub fn pid_of(name: &str) -> anyhow::Result<u32> {
    Ok(std::fs::read_to_string(record(name, "pid"))?.trim().parse()?)
}

/// Whether the process is gone, or only a zombie waiting to be reaped. Its main thread turns zombie
/// before the others have exited, and its sockets close only with the last: every thread must be gone.
fn gone(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return true };
    let zombie = stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
    let threads = std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, Iterator::count);
    zombie && threads <= 1
}
