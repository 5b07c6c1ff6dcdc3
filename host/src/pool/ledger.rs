//! The ledger of one Slurm Node: what its kubelet counts and what Slurm offers and holds there. Pure.
//!
//! Three parties may hold a Node's CPUs, memory and GPUs: Slurm jobs, sunk's pods through their
//! placeholders (a Slurm job too), and pods Slurm does not know of (the slurmd pod itself,
//! DaemonSets, static pods, anything another scheduler or `spec.nodeName` put there). The kubelet
//! counts the pods; Slurm counts its jobs. The pool is held once when what Slurm offers jobs plus
//! what those outside pods hold fits what the Node offers pods; otherwise Slurm may give a job, or a
//! sunk pod the kubelet then refuses, what an outside pod already holds.

use std::fmt;

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;

use crate::kube::quantity;
use crate::scheduler::{WatchedPod, is_counted, kubelet_counts};
use crate::slurm;

const MIB: u64 = 1024 * 1024;
const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// CPU millicores, memory bytes and GPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Amounts {
    pub cpu_millis: u64,
    pub memory_bytes: u64,
    pub gpus: u64,
}

impl Amounts {
    fn plus(self, other: Amounts) -> Amounts {
        Amounts {
            cpu_millis: self.cpu_millis.saturating_add(other.cpu_millis),
            memory_bytes: self.memory_bytes.saturating_add(other.memory_bytes),
            gpus: self.gpus.saturating_add(other.gpus),
        }
    }

    pub(super) fn of_slurm(resources: slurm::Resources) -> Amounts {
        Amounts {
            cpu_millis: resources.cpus.saturating_mul(1000),
            memory_bytes: resources.memory_mib.saturating_mul(MIB),
            gpus: resources.gpus,
        }
    }

    fn get(self, resource: Resource) -> u64 {
        match resource {
            Resource::Cpu => self.cpu_millis,
            Resource::Memory => self.memory_bytes,
            Resource::Gpu => self.gpus,
        }
    }
}

impl fmt::Display for Amounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        for resource in Resource::ALL {
            let amount = self.get(resource);
            if amount > 0 {
                parts.push(resource.show(amount));
            }
        }
        if parts.is_empty() { f.write_str("nothing") } else { f.write_str(&parts.join(", ")) }
    }
}

/// A resource the pool holds once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Resource {
    Cpu,
    Memory,
    Gpu,
}

impl Resource {
    pub const ALL: [Resource; 3] = [Resource::Cpu, Resource::Memory, Resource::Gpu];

    /// The metric label: the resource and its unit.
    pub fn label(self) -> &'static str {
        match self {
            Resource::Cpu => "cpu_millicores",
            Resource::Memory => "memory_bytes",
            Resource::Gpu => "gpus",
        }
    }

    fn show(self, amount: u64) -> String {
        match self {
            Resource::Cpu if amount == 1000 => "1 CPU".to_owned(),
            Resource::Cpu if amount.is_multiple_of(1000) => format!("{} CPUs", amount / 1000),
            Resource::Cpu => format!("{amount}m CPU"),
            Resource::Memory => format!("{} MiB", amount / MIB),
            Resource::Gpu if amount == 1 => "1 GPU".to_owned(),
            Resource::Gpu => format!("{amount} GPUs"),
        }
    }
}

/// A pod the kubelet counts on the Node that no Slurm job holds for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutsidePod {
    /// `namespace/name`.
    pub pod: String,
    pub holds: Amounts,
}

/// Both views of one Node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLedger {
    pub kube_node: String,
    pub slurm_node: String,
    /// What the Node offers pods (its allocatable).
    pub allocatable: Amounts,
    /// What Slurm may give jobs there (the node as slurmd registered it).
    pub slurm_offers: Amounts,
    /// What Slurm's jobs hold there now.
    pub slurm_holds: Amounts,
    /// Pods Slurm does not know of, largest first.
    pub outside: Vec<OutsidePod>,
    /// What hold jobs hold for those pods in Slurm now (see `super::holds`).
    pub held_for_outside: Amounts,
}

/// What the ledger says of a Node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// Slurm's offer and the outside pods fit the Node.
    HeldOnce,
    /// Slurm offers `over` more of each resource than the outside pods leave it; `colliding` when its
    /// jobs already hold some of that.
    Overcommitted { over: Vec<(Resource, u64)>, colliding: bool },
}

impl NodeLedger {
    /// The Node's ledger, from the pods bound to it (any others are ignored). `held_by_slurm` says
    /// whether a pod's share is a Slurm job's (a sunk pod, through its placeholder). None when the
    /// Node does not say what it offers.
    pub fn of(
        node: &Node,
        slurm_node: &slurm::Node,
        pods: &[&WatchedPod],
        held_by_slurm: impl Fn(&WatchedPod) -> bool,
    ) -> Option<NodeLedger> {
        let kube_node = node.name_any();
        let allocatable = node.status.as_ref()?.allocatable.as_ref()?;
        let allocatable = Amounts {
            cpu_millis: allocatable.get("cpu").and_then(quantity::millicores)?,
            memory_bytes: allocatable.get("memory").and_then(quantity::units)?,
            gpus: allocatable.get(GPU_RESOURCE).and_then(quantity::units).unwrap_or(0),
        };
        let mut outside: Vec<OutsidePod> = pods
            .iter()
            .filter(|pod| pod.spec.as_ref().and_then(|spec| spec.node_name.as_deref()) == Some(kube_node.as_str()))
            .filter(|pod| is_counted(pod) && !held_by_slurm(pod))
            .map(|pod| {
                let (cpu_millis, memory_bytes, gpus) = kubelet_counts(pod);
                let name = format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
                OutsidePod { pod: name, holds: Amounts { cpu_millis, memory_bytes, gpus } }
            })
            .filter(|pod| pod.holds != Amounts::default())
            .collect();
        outside.sort_by(|a, b| {
            let key = |pod: &OutsidePod| (pod.holds.gpus, pod.holds.cpu_millis, pod.holds.memory_bytes);
            key(b).cmp(&key(a)).then_with(|| a.pod.cmp(&b.pod))
        });
        Some(NodeLedger {
            kube_node,
            slurm_node: slurm_node.name.clone(),
            allocatable,
            slurm_offers: Amounts::of_slurm(slurm_node.total()),
            slurm_holds: Amounts::of_slurm(slurm_node.held()),
            outside,
            held_for_outside: Amounts::default(),
        })
    }

    /// What the outside pods hold together.
    pub fn outside_holds(&self) -> Amounts {
        self.outside.iter().fold(Amounts::default(), |sum, pod| sum.plus(pod.holds))
    }

    /// The ledger, with what hold jobs hold in Slurm for the outside pods.
    pub fn with_holds(self, held_for_outside: Amounts) -> NodeLedger {
        NodeLedger { held_for_outside, ..self }
    }

    /// What Slurm offers beyond what the outside pods leave it, before any hold job: what hold jobs
    /// must hold for them.
    pub fn beyond_room(&self) -> Amounts {
        let outside = self.outside_holds();
        let over = |resource| {
            let offered = self.slurm_offers.get(resource).saturating_add(outside.get(resource));
            offered.saturating_sub(self.allocatable.get(resource))
        };
        Amounts { cpu_millis: over(Resource::Cpu), memory_bytes: over(Resource::Memory), gpus: over(Resource::Gpu) }
    }

    /// Slurm's offer beside the outside pods, against the Node. What hold jobs hold is Slurm's no
    /// more: the outside pods use it.
    pub fn finding(&self) -> Finding {
        let outside = self.outside_holds();
        let mut over = Vec::new();
        let mut colliding = false;
        for resource in Resource::ALL {
            let room = self.allocatable.get(resource);
            let outside = outside.get(resource);
            let held = self.held_for_outside.get(resource);
            let offered = self.slurm_offers.get(resource).saturating_add(outside).saturating_sub(held);
            if offered > room {
                over.push((resource, offered - room));
                colliding |= self.slurm_holds.get(resource).saturating_add(outside).saturating_sub(held) > room;
            }
        }
        if over.is_empty() { Finding::HeldOnce } else { Finding::Overcommitted { over, colliding } }
    }

    /// The finding in words, for the Node's condition and Event.
    pub fn describe(&self, finding: &Finding) -> String {
        let held = if self.held_for_outside == Amounts::default() {
            String::new()
        } else {
            format!(" (hold jobs keep {} of it for pods outside Slurm)", self.held_for_outside)
        };
        let Finding::Overcommitted { over, colliding } = finding else {
            return format!(
                "Slurm node {} offers {}{held} of the Node's {}; pods outside Slurm hold {}",
                self.slurm_node,
                self.slurm_offers,
                self.allocatable,
                self.outside_holds()
            );
        };
        const SHOWN: usize = 5;
        let mut pods: Vec<String> =
            self.outside.iter().take(SHOWN).map(|pod| format!("{} ({})", pod.pod, pod.holds)).collect();
        if self.outside.len() > SHOWN {
            pods.push(format!("and {} more", self.outside.len() - SHOWN));
        }
        let over: Vec<String> = over.iter().map(|(resource, amount)| resource.show(*amount)).collect();
        let now = if *colliding { "; its jobs already hold some of it" } else { "" };
        format!(
            "Slurm node {} offers {}{held} of the Node's {}, but pods outside Slurm hold {}: {}. Slurm may \
             give away {} they use{now}",
            self.slurm_node,
            self.slurm_offers,
            self.allocatable,
            self.outside_holds(),
            pods.join(", "),
            over.join(", ")
        )
    }
}

#[cfg(test)]
#[path = "ledger_tests.rs"]
mod tests;
