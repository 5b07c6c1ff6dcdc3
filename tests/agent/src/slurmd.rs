//! Runs one real `slurmd -Z` per slurmd pod inside the Slurm root, as a container runtime would.
//!
//! Each slurmd runs in private mount and PID namespaces (`unshare`), which makes it behave like a
//! container:
//! - its own `/run/slurm`: `auth/slurm` listens on `/run/slurm/sack.socket`, and two slurmd sharing
//!   that socket fail to start;
//! - its own `/proc`, so `proctrack/linuxproc` only sees the processes of its own node;
//! - slurmd is PID 1 of its namespace, so when it ends its slurmstepd and job processes end too,
//!   as they would when a container stops.
//!
//! The process tree is `agent → unshare → sh (PID 1 of the namespace) → slurmd`. The pidfile
//! `<dir>/slurmd-<node>.pid` holds slurmd's own pid (as the host sees it): SIGTERM or SIGKILL to it
//! ends that slurmd, its namespace ends with it, and the agent restarts it while its pod wants it.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::Write as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::jiff::Timestamp;
use tokio::process::{Child, Command};
use tokio::sync::watch;

use crate::status::{Exit, Run};

/// Slurm node name → port, kept in the agent's directory for the next agent.
const PORTS_FILE: &str = "ports";
/// How long after an unexpected exit a slurmd is started again.
const RESTART_DELAY: Duration = Duration::from_secs(1);

/// Runs inside the new namespaces as their PID 1: a private /proc and /run/slurm in the Slurm
/// root, then slurmd in the foreground. The shell stays PID 1, as a container's init would: it
/// passes SIGTERM/SIGINT on to slurmd, reaps the slurmstepd orphaned to it (slurmd would leave
/// them zombies), and exits with slurmd's status, which ends every process left in the namespace.
/// /run/slurm stays root's: slurmd 26.05 refuses a run directory its SlurmdUser (root) does not own.
///
/// The fake Nodes' slurmd are not confined: they declare more CPUs and memory than this machine has,
/// and share its cgroups, so each reads a copy of the cluster's configuration with cgroups off
/// (`/etc/slurm/unconfined/<node>/`; the key and gres.conf linked from `/etc/slurm`).
const LAUNCH: &str = r#"set -e
mount -t proc proc "$1/proc"
mkdir -p "$1/run/slurm" "$1/var/spool/slurmd/$2"
mount -t tmpfs -o mode=0755 tmpfs "$1/run/slurm"
conf="$1/etc/slurm/unconfined/$2"
mkdir -p "$conf"
for shared in slurm.key gres.conf topology.yaml; do
  if [ -e "$1/etc/slurm/$shared" ]; then ln -sfn "../../$shared" "$conf/$shared"; fi
done
sed -e 's|^ProctrackType=.*|ProctrackType=proctrack/linuxproc|' -e 's|^TaskPlugin=.*|TaskPlugin=task/none|' \
  -e 's|^JobAcctGatherType=.*|JobAcctGatherType=jobacct_gather/none|' "$1/etc/slurm/slurm.conf" >"$conf/slurm.conf"
echo CgroupPlugin=disabled >"$conf/cgroup.conf"
SLURM_CONF="/etc/slurm/unconfined/$2/slurm.conf" chroot "$1" /usr/sbin/slurmd -D -Z -N "$2" --conf "$3" &
slurmd=$!
trap 'kill -TERM $slurmd 2>/dev/null' TERM INT HUP
set +e
while :; do
  wait $slurmd; status=$?
  kill -0 $slurmd 2>/dev/null || break
done
exit $status"#;

/// The dynamic node configuration a slurmd pod asks for: the argument after `--conf`.
pub fn conf_from_args(args: &[String]) -> Option<&str> {
    args.iter().position(|arg| arg == "--conf").and_then(|at| args.get(at + 1)).map(String::as_str)
}

/// The `--conf` slurmd is started with: the pod's configuration with the agent's port (any port
/// the pod named is dropped, the agent owns ports).
pub fn conf_with_port(conf: &str, port: u16) -> String {
    let mut words: Vec<&str> =
        conf.split_whitespace().filter(|word| !word.to_ascii_lowercase().starts_with("port=")).collect();
    let port = format!("Port={port}");
    words.push(&port);
    words.join(" ")
}

/// slurmd ports: `base + k`, a k per Slurm node name, the lowest free one when the name is first
/// seen. A name keeps its port for the agent's lifetime (and across agent restarts, through the
/// `ports` file in the agent's directory), and no two names share one.
#[derive(Debug, Default)]
pub struct Ports {
    base: u16,
    assigned: HashMap<String, u16>,
}

impl Ports {
    pub fn new(base: u16) -> Self {
        Self { base, assigned: HashMap::new() }
    }

    /// Ports handed out by an earlier agent: lines of `<node> <port>`; entries below `base`
    /// (another base) and duplicate ports are dropped.
    pub fn parse(base: u16, text: &str) -> Self {
        let mut ports = Self::new(base);
        for line in text.lines() {
            let mut words = line.split_whitespace();
            let (Some(node), Some(Ok(port)), None) = (words.next(), words.next().map(str::parse::<u16>), words.next())
            else {
                continue;
            };
            if port >= base && !ports.assigned.values().any(|used| *used == port) {
                ports.assigned.insert(node.to_string(), port);
            }
        }
        ports
    }

    pub fn render(&self) -> String {
        let mut entries: Vec<_> = self.assigned.iter().collect();
        entries.sort_by_key(|(_, port)| **port);
        entries.iter().map(|(node, port)| format!("{node} {port}\n")).collect()
    }

    pub fn port(&mut self, node: &str) -> Option<u16> {
        if let Some(port) = self.assigned.get(node) {
            return Some(*port);
        }
        let port = (self.base..=u16::MAX).find(|port| !self.assigned.values().any(|used| used == port))?;
        self.assigned.insert(node.to_string(), port);
        Some(port)
    }
}

/// What [`Supervisor::ensure`] found.
#[derive(Debug)]
pub enum Ensure {
    /// The pod's slurmd runs (or is between an exit and its restart).
    Running(Run),
    /// Another pod's slurmd (this uid) still holds the Slurm node name, and with it the port.
    Busy(String),
}

/// One started slurmd: `unshare` (our child) and slurmd's pid.
struct Process {
    child: Child,
    slurmd: Option<u32>,
}

/// A slurmd the agent runs for one pod.
struct Slot {
    id: u64,
    uid: String,
    run: Arc<Mutex<Run>>,
    /// Set (once) to the grace period when the slurmd is to stop.
    stop: watch::Sender<Option<Duration>>,
    /// Turns true when the slurmd has stopped for good and the slot is gone.
    done: watch::Receiver<bool>,
}

/// The slurmd processes this agent runs, by Slurm node name.
pub struct Supervisor {
    root: PathBuf,
    dir: PathBuf,
    ports: Mutex<Ports>,
    slots: Mutex<HashMap<String, Slot>>,
    /// Held while a slurmd is being started, so two pods never start one for the same name.
    starting: tokio::sync::Mutex<()>,
    next_id: AtomicU64,
    closed: AtomicBool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Supervisor {
    pub fn new(root: PathBuf, dir: PathBuf, port_base: u16) -> anyhow::Result<Self> {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let known = std::fs::read_to_string(dir.join(PORTS_FILE)).unwrap_or_default();
        Ok(Self {
            root,
            ports: Mutex::new(Ports::parse(port_base, &known)),
            dir,
            slots: Mutex::default(),
            starting: tokio::sync::Mutex::new(()),
            next_id: AtomicU64::new(0),
            closed: AtomicBool::new(false),
        })
    }

    fn pidfile(&self, node: &str) -> PathBuf {
        self.dir.join(format!("slurmd-{node}.pid"))
    }

    fn logfile(&self, node: &str) -> PathBuf {
        self.dir.join(format!("slurmd-{node}.log"))
    }

    /// Kills every slurmd a previous agent left behind, found by its pidfiles.
    pub async fn kill_stale(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        let mut stale = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let is_pidfile = path.extension().is_some_and(|ext| ext == "pid")
                && path.file_name().is_some_and(|name| name.to_string_lossy().starts_with("slurmd-"));
            if !is_pidfile {
                continue;
            }
            let pid = std::fs::read_to_string(&path).ok().and_then(|text| text.trim().parse::<u32>().ok());
            if let Some(pid) = pid.filter(|pid| is_slurmd(*pid)) {
                tracing::info!(pid, pidfile = %path.display(), "stopping a slurmd left by a previous agent");
                stale.push(terminate_foreign(pid));
            }
            if let Err(error) = std::fs::remove_file(&path) {
                tracing::warn!(%error, pidfile = %path.display(), "could not remove a stale pidfile");
            }
        }
        futures::future::join_all(stale).await;
    }

    /// Makes sure the pod `uid` has a slurmd running as Slurm node `node`. `base_restarts` is the
    /// restartCount the pod reports now (counting goes on from there); `still_wanted` tells, when
    /// slurmd exits, whether the pod still exists and is not being deleted; `restarted` is called
    /// after every restart.
    pub async fn ensure(
        self: &Arc<Self>,
        node: &str,
        uid: &str,
        conf: &str,
        base_restarts: i32,
        still_wanted: impl Fn() -> bool + Send + Sync + 'static,
        restarted: impl Fn() + Send + Sync + 'static,
    ) -> anyhow::Result<Ensure> {
        let _starting = self.starting.lock().await;
        if let Some(found) = self.find(node, uid) {
            return Ok(found);
        }
        anyhow::ensure!(!self.closed.load(Ordering::SeqCst), "the agent is shutting down");
        let port = self.port(node)?;
        let conf = conf_with_port(conf, port);
        let process = self.spawn(node, &conf).await?;
        let run = Arc::new(Mutex::new(Run { restarts: base_restarts, started_at: Timestamp::now(), last_exit: None }));
        let (stop, stop_rx) = watch::channel(None);
        let (done_tx, done) = watch::channel(false);
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let snapshot = lock(&run).clone();
        lock(&self.slots).insert(node.to_string(), Slot { id, uid: uid.to_string(), run: run.clone(), stop, done });
        tracing::info!(node, uid, conf, slurmd = process.slurmd, "started slurmd");
        let task = Task {
            supervisor: self.clone(),
            node: node.to_string(),
            conf,
            id,
            run,
            stop: stop_rx,
            still_wanted: Box::new(still_wanted),
            restarted: Box::new(restarted),
        };
        tokio::spawn(task.supervise(process, done_tx));
        Ok(Ensure::Running(snapshot))
    }

    fn port(&self, node: &str) -> anyhow::Result<u16> {
        let mut ports = lock(&self.ports);
        let port = ports.port(node).with_context(|| format!("no slurmd port left for Slurm node {node}"))?;
        let file = self.dir.join(PORTS_FILE);
        if let Err(error) = std::fs::write(&file, ports.render()) {
            tracing::warn!(%error, file = %file.display(), "could not record slurmd ports");
        }
        Ok(port)
    }

    fn find(&self, node: &str, uid: &str) -> Option<Ensure> {
        let slots = lock(&self.slots);
        let slot = slots.get(node)?;
        Some(if slot.uid == uid { Ensure::Running(lock(&slot.run).clone()) } else { Ensure::Busy(slot.uid.clone()) })
    }

    /// Starts `unshare … slurmd` for `node` and finds slurmd's pid.
    async fn spawn(&self, node: &str, conf: &str) -> anyhow::Result<Process> {
        let logfile = self.logfile(node);
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&logfile)
            .with_context(|| format!("opening {}", logfile.display()))?;
        let _ = writeln!(log, "--- {} sunk-test-agent: starting slurmd -N {node} --conf \"{conf}\"", Timestamp::now());
        let mut command = Command::new("unshare");
        command
            .args(["--mount", "--propagation", "private", "--pid", "--fork", "--kill-child", "sh", "-c", LAUNCH, "sh"])
            .arg(&self.root)
            .arg(node)
            .arg(conf)
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true);
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            command.pre_exec(|| {
                // Out of the agent's process group (a Ctrl-C meant for the agent does not reach
                // slurmd), and killed with the agent should the agent itself be killed.
                libc::setsid();
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().context("running unshare")?;
        let slurmd = match child.id() {
            Some(unshare) => find_slurmd(unshare).await,
            None => None,
        };
        let pid = slurmd.or(child.id());
        if let Some(pid) = pid {
            let pidfile = self.pidfile(node);
            std::fs::write(&pidfile, format!("{pid}\n")).with_context(|| format!("writing {}", pidfile.display()))?;
        }
        Ok(Process { child, slurmd })
    }

    /// Stops the slurmd of `node` (only if it belongs to pod `uid`, when given): SIGTERM, then
    /// SIGKILL after `grace`. Returns once it is gone. Concurrent callers all wait for the end.
    pub async fn stop(&self, node: &str, uid: Option<&str>, grace: Duration) {
        // A slurmd being started right now is in its slot once this lock is free.
        drop(self.starting.lock().await);
        let mut done = {
            let slots = lock(&self.slots);
            let Some(slot) = slots.get(node).filter(|slot| uid.is_none_or(|uid| uid == slot.uid)) else { return };
            slot.stop.send_if_modified(|stop| {
                let first = stop.is_none();
                if first {
                    *stop = Some(grace);
                }
                first
            });
            slot.done.clone()
        };
        let _ = done.wait_for(|done| *done).await;
    }

    /// The slurmd this agent runs: (Slurm node name, pod uid).
    pub fn owned(&self) -> Vec<(String, String)> {
        lock(&self.slots).iter().map(|(node, slot)| (node.clone(), slot.uid.clone())).collect()
    }

    /// Stops every slurmd, all at once, and refuses to start new ones.
    pub async fn stop_all(&self, grace: Duration) {
        self.closed.store(true, Ordering::SeqCst);
        let owned = self.owned();
        futures::future::join_all(owned.iter().map(|(node, _)| self.stop(node, None, grace))).await;
    }
}

/// Watches one slurmd: restarts it after an unexpected exit while its pod wants it, stops it on request.
struct Task {
    supervisor: Arc<Supervisor>,
    node: String,
    conf: String,
    id: u64,
    run: Arc<Mutex<Run>>,
    stop: watch::Receiver<Option<Duration>>,
    still_wanted: Box<dyn Fn() -> bool + Send + Sync>,
    restarted: Box<dyn Fn() + Send + Sync>,
}

impl Task {
    async fn supervise(mut self, first: Process, done: watch::Sender<bool>) {
        let node = self.node.clone();
        let mut current = Some(first);
        loop {
            match current.take() {
                Some(mut process) => {
                    tokio::select! {
                        status = process.child.wait() => {
                            let finished_at = Timestamp::now();
                            let _ = std::fs::remove_file(self.supervisor.pidfile(&node));
                            let exit = exit_of(status.ok(), lock(&self.run).started_at, finished_at);
                            tracing::warn!(node, code = exit.code, signal = exit.signal, "slurmd exited");
                            lock(&self.run).last_exit = Some(exit);
                        }
                        grace = stop_requested(&mut self.stop) => {
                            terminate(&node, &mut process, grace).await;
                            let _ = std::fs::remove_file(self.supervisor.pidfile(&node));
                            break;
                        }
                    }
                }
                None => {
                    tokio::select! {
                        _ = tokio::time::sleep(RESTART_DELAY) => {}
                        _ = stop_requested(&mut self.stop) => break,
                    }
                    if self.supervisor.closed.load(Ordering::SeqCst) || !(self.still_wanted)() {
                        tracing::info!(node, "slurmd's pod is gone or being deleted; not restarting it");
                        break;
                    }
                    match self.supervisor.spawn(&node, &self.conf).await {
                        Ok(process) => {
                            {
                                let mut run = lock(&self.run);
                                run.restarts += 1;
                                run.started_at = Timestamp::now();
                            }
                            tracing::info!(node, slurmd = process.slurmd, "restarted slurmd");
                            current = Some(process);
                            (self.restarted)();
                        }
                        Err(error) => tracing::error!(node, error = format!("{error:#}"), "could not restart slurmd"),
                    }
                }
            }
        }
        {
            let mut slots = lock(&self.supervisor.slots);
            if slots.get(&node).is_some_and(|slot| slot.id == self.id) {
                slots.remove(&node);
            }
        }
        tracing::info!(node, "slurmd stopped");
        let _ = done.send(true);
    }
}

/// The grace period once a stop is requested (or none at all if the supervisor is gone).
async fn stop_requested(stop: &mut watch::Receiver<Option<Duration>>) -> Duration {
    match stop.wait_for(Option::is_some).await {
        Ok(grace) => grace.unwrap_or_default(),
        Err(_) => Duration::ZERO,
    }
}

fn exit_of(status: Option<ExitStatus>, started_at: Timestamp, finished_at: Timestamp) -> Exit {
    let signal = status.and_then(|status| status.signal());
    let code = match (status.and_then(|status| status.code()), signal) {
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal,
        (None, None) => -1,
    };
    Exit { code, signal, started_at, finished_at }
}

/// SIGTERM to slurmd, up to `grace` for it to end, then SIGKILL; reaps it.
async fn terminate(node: &str, process: &mut Process, grace: Duration) {
    match process.slurmd {
        Some(pid) => signal(pid, libc::SIGTERM),
        // Without slurmd's pid, killing `unshare` kills slurmd (`--kill-child`).
        None => drop(process.child.start_kill()),
    }
    if tokio::time::timeout(grace, process.child.wait()).await.is_err() {
        tracing::warn!(node, grace = ?grace, "slurmd outlived its grace period; killing it");
        if let Some(pid) = process.slurmd {
            signal(pid, libc::SIGKILL);
        }
        let _ = process.child.start_kill();
        let _ = process.child.wait().await;
    }
}

fn children(pid: u32) -> Option<Vec<u32>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    Some(text.split_whitespace().filter_map(|pid| pid.parse().ok()).collect())
}

fn program(pid: u32) -> Option<String> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let first = cmdline.split(|byte| *byte == 0).next()?;
    Some(String::from_utf8_lossy(first).into_owned())
}

/// slurmd's pid (as the host sees it) under `unshare` (pid `unshare`) → sh → `chroot`+slurmd,
/// once `chroot` has been executed (it then execs slurmd in place).
async fn find_slurmd(unshare: u32) -> Option<u32> {
    for _ in 0..400 {
        let init = children(unshare)?.first().copied();
        let slurmd = init
            .and_then(children)
            .unwrap_or_default()
            .into_iter()
            .find(|pid| program(*pid).is_some_and(|program| program == "chroot" || program.ends_with("/slurmd")));
        if slurmd.is_some() {
            return slurmd;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    None
}

fn is_slurmd(pid: u32) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&cmdline).contains("slurmd")
}

fn alive(pid: u32) -> bool {
    // A zombie has ended: only its parent's wait is missing.
    std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("stat"))
        .ok()
        .and_then(|stat| stat.rsplit_once(')').map(|(_, rest)| rest.trim_start().starts_with('Z')))
        .is_some_and(|zombie| !zombie)
}

/// Stops a slurmd this agent did not start: SIGTERM, then SIGKILL after 5 s.
async fn terminate_foreign(pid: u32) {
    signal(pid, libc::SIGTERM);
    for _ in 0..50 {
        if !alive(pid) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    signal(pid, libc::SIGKILL);
}

fn signal(pid: u32, signal: libc::c_int) {
    // Never 0 or -1 (the process group, every process), whatever a pidfile says.
    let Ok(pid) = libc::pid_t::try_from(pid) else { return };
    if pid > 1 {
        // SAFETY: kill(2) has no memory-safety preconditions.
        unsafe {
            libc::kill(pid, signal);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|arg| arg.to_string()).collect()
    }

    #[test]
    fn finds_the_conf_argument() {
        let args = strings(&["-Z", "--conf", "CPUs=4 RealMemory=8000 Gres=gpu:2 Features=gpu-a100"]);
        assert_eq!(conf_from_args(&args), Some("CPUs=4 RealMemory=8000 Gres=gpu:2 Features=gpu-a100"));
        assert_eq!(conf_from_args(&args[..2]), None);
        assert_eq!(conf_from_args(&strings(&["-Z"])), None);
        assert_eq!(conf_from_args(&[]), None);
    }

    #[test]
    fn the_agent_owns_the_port() {
        assert_eq!(conf_with_port("CPUs=4 Features=A100", 17003), "CPUs=4 Features=A100 Port=17003");
        assert_eq!(conf_with_port("CPUs=4  port=1 Features=A100", 17003), "CPUs=4 Features=A100 Port=17003");
        assert_eq!(conf_with_port("", 17000), "Port=17000");
    }

    #[test]
    fn ports_are_stable_per_node_and_never_shared() {
        let mut ports = Ports::new(17000);
        assert_eq!(ports.port("slurm-1"), Some(17000));
        assert_eq!(ports.port("slurm-2"), Some(17001));
        assert_eq!(ports.port("slurm-1"), Some(17000));
        assert_eq!(ports.port("slurm-3"), Some(17002));
        assert_eq!(ports.port("slurm-2"), Some(17001));
    }

    #[test]
    fn ports_survive_an_agent_restart() {
        let mut ports = Ports::new(17000);
        ports.port("slurm-2");
        ports.port("slurm-1");
        ports.port("slurm-3");
        let text = ports.render();
        assert_eq!(text, "slurm-2 17000\nslurm-1 17001\nslurm-3 17002\n");
        let mut again = Ports::parse(17000, &text);
        assert_eq!(again.port("slurm-1"), Some(17001));
        assert_eq!(again.port("slurm-4"), Some(17003));
        assert_eq!(again.port("slurm-2"), Some(17000));
    }

    #[test]
    fn bad_or_foreign_port_records_are_dropped() {
        let mut ports = Ports::parse(17000, "a 17001\nb 16000\nc 17001\ngarbage\nd x\ne 17005 extra\n");
        assert_eq!(ports.port("a"), Some(17001));
        assert_eq!(ports.port("b"), Some(17000));
        assert_eq!(ports.port("c"), Some(17002));
    }

    #[test]
    fn ports_run_out_at_the_top() {
        let mut ports = Ports::new(u16::MAX - 1);
        assert_eq!(ports.port("a"), Some(u16::MAX - 1));
        assert_eq!(ports.port("b"), Some(u16::MAX));
        assert_eq!(ports.port("c"), None);
        assert_eq!(ports.port("a"), Some(u16::MAX - 1));
    }

    #[test]
    fn exits_by_signal_report_128_plus_the_signal() {
        let now = Timestamp::now();
        let killed = exit_of(Some(ExitStatus::from_raw(libc::SIGKILL)), now, now);
        assert_eq!((killed.code, killed.signal), (137, Some(9)));
        let failed = exit_of(Some(ExitStatus::from_raw(1 << 8)), now, now);
        assert_eq!((failed.code, failed.signal), (1, None));
    }

    #[test]
    fn liveness_of_processes() {
        assert!(alive(std::process::id()));
        assert!(!alive(u32::MAX));
        assert!(!is_slurmd(std::process::id()) || std::env::args().any(|arg| arg.contains("slurmd")));
    }
}
