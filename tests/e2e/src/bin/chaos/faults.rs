//! The faults a chaos run injects, one at a time, and when the system has recovered from one: the
//! part it hit answers again, a host holds the Lease, and no pod waits while Slurm has room.

use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams};
use sunk_e2e::process::host_process;
use sunk_e2e::{Frozen, kubectl, restart_component};

use crate::invariants::{Invariants, Sample};
use crate::random::Random;
use crate::world::{POOL, World};

/// A fault not recovered from within this long is itself a violation.
pub const RECOVERY_LIMIT: Duration = Duration::from_secs(180);
/// How long a frozen leader stays frozen: past its Lease (10 s) and the takeover.
const FROZEN_FOR: Duration = Duration::from_secs(20);
/// How long a Node stays cordoned.
const CORDONED_FOR: Duration = Duration::from_secs(20);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fault {
    KillLeader,
    FreezeLeader,
    RestartSlurmctld,
    RestartSlurmrestd,
    RestartApiServer,
    RestartKubelet,
    DeleteSlurmdPod,
    CordonNode,
}

impl Fault {
    pub const ALL: [Fault; 8] = [
        Fault::KillLeader,
        Fault::FreezeLeader,
        Fault::RestartSlurmctld,
        Fault::RestartSlurmrestd,
        Fault::RestartApiServer,
        Fault::RestartKubelet,
        Fault::DeleteSlurmdPod,
        Fault::CordonNode,
    ];

    /// The name `--faults` takes.
    pub fn flag(self) -> &'static str {
        match self {
            Fault::KillLeader => "kill-leader",
            Fault::FreezeLeader => "freeze-leader",
            Fault::RestartSlurmctld => "restart-slurmctld",
            Fault::RestartSlurmrestd => "restart-slurmrestd",
            Fault::RestartApiServer => "restart-apiserver",
            Fault::RestartKubelet => "restart-kubelet",
            Fault::DeleteSlurmdPod => "delete-slurmd-pod",
            Fault::CordonNode => "cordon-node",
        }
    }

    /// The kinds `--faults` names: `all`, `none`, or a comma list of [`Fault::flag`]s.
    pub fn parse_list(list: &str) -> anyhow::Result<Vec<Fault>> {
        match list {
            "all" => Ok(Self::ALL.to_vec()),
            "none" => Ok(Vec::new()),
            _ => list
                .split(',')
                .map(|name| {
                    Self::ALL.into_iter().find(|fault| fault.flag() == name).ok_or_else(|| {
                        let known: Vec<&str> = Self::ALL.iter().map(|fault| fault.flag()).collect();
                        anyhow::anyhow!("unknown fault {name:?} (known: all, none, {})", known.join(", "))
                    })
                })
                .collect(),
        }
    }

    /// The kinds `chosen`, in an order the seed shuffles: the run injects them in turn, so that even
    /// a short run injects each kind once.
    pub fn shuffled(chosen: &[Fault], random: &mut Random) -> Vec<Fault> {
        let mut order = chosen.to_vec();
        for i in (1..order.len()).rev() {
            let j = usize::try_from(random.between((0, i as u64))).unwrap_or_default();
            order.swap(i, j);
        }
        order
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Fault::KillLeader => "leader SIGKILL",
            Fault::FreezeLeader => "leader SIGSTOP past its Lease",
            Fault::RestartSlurmctld => "slurmctld restart",
            Fault::RestartSlurmrestd => "slurmrestd restart",
            Fault::RestartApiServer => "kube-apiserver restart (SIGKILL)",
            Fault::RestartKubelet => "kubelet restart (SIGKILL)",
            Fault::DeleteSlurmdPod => "slurmd pod deleted",
            Fault::CordonNode => "Node cordoned, uncordoned",
        })
    }
}

/// What is left to undo of a fault, and when.
enum Undo {
    /// The guard thaws the leader when dropped.
    Thaw {
        at: Instant,
        _frozen: Frozen,
    },
    Uncordon(String, Instant),
}

/// A fault injected, until it is recovered from.
pub struct Injected {
    pub fault: Fault,
    pub started: Instant,
    undo: Option<Undo>,
    /// When the fault ended (at once, or when it was undone): recovery is timed from here.
    ended: (Instant, Timestamp),
    /// The Node whose kubelet was restarted.
    kubelet: Option<String>,
    /// What the system lacked at the last look (`None` before the fault was undone).
    not_yet: Option<String>,
}

pub async fn inject(
    world: &World,
    fault: Fault,
    random: &mut Random,
    invariants: &mut Invariants,
) -> anyhow::Result<Injected> {
    let started = Instant::now();
    let mut undo = None;
    let mut kubelet = None;
    match fault {
        Fault::KillLeader => signal_leader(world, "KILL").await?,
        Fault::FreezeLeader => {
            let pid = leader_pid(world).await?;
            undo = Some(Undo::Thaw { at: started + FROZEN_FOR, _frozen: Frozen::process(pid)? });
        }
        Fault::RestartSlurmctld => restart_component("slurmctld", "TERM").await?,
        Fault::RestartSlurmrestd => restart_component("slurmrestd", "TERM").await?,
        Fault::RestartApiServer => restart_component("kube-apiserver", "KILL").await?,
        Fault::RestartKubelet => {
            let node = random.pick(&POOL).copied().unwrap_or(POOL[0]);
            restart_component(&format!("kubelet-{node}"), "KILL").await?;
            kubelet = Some(node.to_string());
        }
        Fault::DeleteSlurmdPod => {
            let label = sunk::scheduler::SLURM_NODE_LABEL;
            let slurmd = world.cluster.pods().list(&ListParams::default().labels(label)).await?.items;
            let pod = random.pick(&slurmd).ok_or_else(|| anyhow::anyhow!("no slurmd pod to delete"))?;
            invariants.deleted_slurmd.insert(pod.uid().unwrap_or_default());
            world.cluster.pods().delete(&pod.name_any(), &DeleteParams::default()).await?;
        }
        Fault::CordonNode => {
            let node = random.pick(&POOL).copied().unwrap_or(POOL[0]);
            run_kubectl(&["cordon", node])?;
            undo = Some(Undo::Uncordon(node.to_string(), started + CORDONED_FOR));
        }
    }
    Ok(Injected { fault, started, undo, ended: (Instant::now(), Timestamp::now()), kubelet, not_yet: None })
}

/// Where a fault's recovery stands.
pub enum Recovery {
    /// Recovered, this long after the fault ended.
    Recovered(Duration),
    /// Not recovered within [`RECOVERY_LIMIT`]: the violation, saying what was still missing.
    GaveUp(String),
    Waiting,
}

impl Injected {
    /// Where recovery stands, judged on the latest sample.
    pub async fn recovery(&mut self, world: &World, sample: Option<&Sample>) -> Recovery {
        if let Some(took) = self.recovered(world, sample).await {
            return Recovery::Recovered(took);
        }
        if self.started.elapsed() <= RECOVERY_LIMIT {
            return Recovery::Waiting;
        }
        let missing = self.not_yet.as_deref().unwrap_or("not undone");
        Recovery::GaveUp(format!("{} not recovered within {RECOVERY_LIMIT:?}: {missing}", self.fault))
    }

    /// How long recovery took from the fault's end, once it is undone and the system whole again
    /// (judged on the latest sample); `None` until then.
    async fn recovered(&mut self, world: &World, sample: Option<&Sample>) -> Option<Duration> {
        if let Some(Undo::Thaw { at, .. } | Undo::Uncordon(_, at)) = &self.undo {
            if Instant::now() < *at {
                return None;
            }
            if let Some(Undo::Uncordon(node, _)) = &self.undo {
                run_kubectl(&["uncordon", node]).ok()?;
            }
            // Dropping a Thaw sends SIGCONT.
            self.undo = None;
            self.ended = (Instant::now(), Timestamp::now());
            return None;
        }
        self.not_yet = self.missing(world, sample).await;
        self.not_yet.is_none().then(|| self.ended.0.elapsed())
    }

    /// What the system still lacks after this fault, if anything.
    async fn missing(&self, world: &World, sample: Option<&Sample>) -> Option<String> {
        let since = self.ended.1;
        // A fault of the leader or of the API server is over once a host renews the Lease after it.
        let leading = match self.fault {
            Fault::KillLeader | Fault::FreezeLeader | Fault::RestartApiServer => {
                world.lease_renewed_since(Some(since)).await.is_some()
            }
            _ => world.leader().await.is_some(),
        };
        if !leading {
            return Some("no host has renewed the Lease".into());
        }
        if let Some(node) = &self.kubelet
            && !world.kubelet_renewed_since(node, since).await
        {
            return Some(format!("the kubelet of {node} has not renewed its Node Lease"));
        }
        if world.cluster.kube.apiserver_version().await.is_err() {
            return Some("the API server does not answer".into());
        }
        if world.cluster.slurm.ping().await.is_err() {
            return Some("slurmrestd does not answer".into());
        }
        let Some(sample) = sample else { return Some("the last sample could not be taken".into()) };
        if sample.pool_nodes_usable < POOL.len() {
            return Some(format!(
                "{} of the pool's Slurm nodes take jobs: {}",
                sample.pool_nodes_usable, sample.pool_states
            ));
        }
        (sample.pending_with_room > 0)
            .then(|| format!("{} pods wait while a Node of the pool is idle in Slurm", sample.pending_with_room))
    }
}

async fn leader_pid(world: &World) -> anyhow::Result<u32> {
    let leader = world.leader().await.ok_or_else(|| anyhow::anyhow!("no host holds the Lease"))?;
    host_process(&leader).ok_or_else(|| anyhow::anyhow!("no sunk process runs as pod {leader}"))
}

async fn signal_leader(world: &World, signal: &str) -> anyhow::Result<()> {
    let pid = leader_pid(world).await?;
    let status = std::process::Command::new("kill").arg(format!("-{signal}")).arg(pid.to_string()).status()?;
    anyhow::ensure!(status.success(), "kill -{signal} {pid} failed");
    Ok(())
}

fn run_kubectl(args: &[&str]) -> anyhow::Result<()> {
    let output = kubectl(args).output()?;
    anyhow::ensure!(output.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    Ok(())
}
