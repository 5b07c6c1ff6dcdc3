//! Where a pod's claimed volumes can be mounted, as kube-scheduler's VolumeBinding and VolumeZone
//! filters read it: a PersistentVolume's required node affinity (local volumes, zonal disks) and its
//! zone and region labels admit some Nodes only, and a pod placed elsewhere would never start (the
//! kubelet cannot mount the volume). The claims are those of `spec.volumes[].persistentVolumeClaim`
//! and of generic ephemeral volumes (whose claim, `<pod>-<volume>`, is made for the pod).
//!
//! sunk binds pods, not volumes: a claim not bound yet whose StorageClass waits for its first
//! consumer would need the scheduler to choose the volume's Node and provision or bind it there, as
//! kube-scheduler does; sunk does not, and says so, naming the volume. Any other claim not ready
//! (missing, not bound yet, its volume not listed) makes the pod wait for it, as kube-scheduler's does.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, NodeSelector, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;

use crate::kube::node_match::selector_matches;
use crate::scheduler::watched_pod::{VolumeNeeds, WatchedPod};

/// The claims, volumes and storage classes a pod's volumes are looked up in.
pub trait Claims {
    fn claim(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>>;
    fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>>;
    fn class(&self, name: &str) -> Option<Arc<StorageClass>>;
}

/// What a pod's claimed volumes say of where it may run.
#[derive(Debug, Clone, PartialEq)]
pub enum VolumeReach {
    /// No claimed volume limits the Nodes.
    Anywhere,
    /// Only on Nodes every limit admits.
    OnlyWhere(Vec<Limit>),
    /// A claim not ready for the pod (missing, not bound yet, its volume not listed): it waits.
    NotReady { field: String, why: String },
    /// A claim only a scheduler that binds volumes could place the pod for.
    Unsupported { field: String, why: String },
}

/// What one bound volume asks of a Node.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    /// The pod's volume and its PersistentVolume, as a refusal names them.
    volume: String,
    /// `spec.nodeAffinity.required` of the PersistentVolume.
    node_affinity: Option<NodeSelector>,
    /// The PersistentVolume's zone and region labels: each key's values, one of which a Node's label
    /// for that key must be.
    zones: Vec<(ZoneLabel, BTreeSet<String>)>,
}

/// Why a Node is refused, in the words of kube-scheduler's filters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conflict<'a> {
    NodeAffinity { volume: &'a str },
    Zone { volume: &'a str, key: &'static str },
}

impl fmt::Display for Conflict<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Conflict::NodeAffinity { volume } => write!(f, "volume node affinity conflict: {volume}"),
            Conflict::Zone { volume, key } => write!(f, "no available volume zone: {volume} ({key})"),
        }
    }
}

/// The annotation the PersistentVolume controller puts on a claim once it has bound it.
const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";

/// A zone or region label of a PersistentVolume, and the label a Node may carry for it instead: a beta
/// key is matched by its GA label too.
type ZoneLabel = (&'static str, &'static str);

/// The zone and region labels kube-scheduler's VolumeZone filter reads.
const ZONE_LABELS: [ZoneLabel; 4] = [
    ("topology.kubernetes.io/zone", "topology.kubernetes.io/zone"),
    ("topology.kubernetes.io/region", "topology.kubernetes.io/region"),
    ("failure-domain.beta.kubernetes.io/zone", "topology.kubernetes.io/zone"),
    ("failure-domain.beta.kubernetes.io/region", "topology.kubernetes.io/region"),
];

/// The first volume of the pod that is a claim, by field: what a host that reads no claims cannot
/// place the pod for.
pub fn first_claim(pod: &WatchedPod) -> Option<String> {
    let (at, volume) = volumes(pod).iter().enumerate().find(|(_, volume)| claim_name(pod, volume).is_some())?;
    Some(field(at, volume))
}

/// Whether the pod mounts claim `name` (of its own namespace).
pub fn mounts(pod: &WatchedPod, name: &str) -> bool {
    volumes(pod).iter().any(|volume| claim_name(pod, volume).as_deref() == Some(name))
}

/// Where the pod's claimed volumes let it run. A claim sunk cannot place the pod for is named before
/// one that is only not ready: the owner must change it, whatever the others become.
pub fn reach(pod: &WatchedPod, claims: &impl Claims) -> VolumeReach {
    let volumes = volumes(pod);
    let mut limits = Vec::new();
    let mut not_ready = None;
    for (at, volume) in volumes.iter().enumerate() {
        let Some(name) = claim_name(pod, volume) else { continue };
        match bound_volume(pod, volume, &name, claims) {
            Ok(pv) => {
                limits.extend(Limit::of(&pv, format!("{} (PersistentVolume {})", field(at, volume), pv_name(&pv))))
            }
            Err(Unready::Unsupported(why)) => return VolumeReach::Unsupported { field: field(at, volume), why },
            Err(Unready::Waits(why)) => {
                not_ready.get_or_insert(VolumeReach::NotReady { field: field(at, volume), why });
            }
        }
    }
    match not_ready {
        Some(waits) => waits,
        None if limits.is_empty() => VolumeReach::Anywhere,
        None => VolumeReach::OnlyWhere(limits),
    }
}

impl Limit {
    /// What `pv` asks of a Node, if anything.
    fn of(pv: &PersistentVolume, volume: String) -> Option<Self> {
        let node_affinity = pv.spec.as_ref().and_then(|spec| spec.node_affinity.as_ref()?.required.clone());
        let labels = pv.metadata.labels.as_ref();
        let zones: Vec<(ZoneLabel, BTreeSet<String>)> = ZONE_LABELS
            .into_iter()
            .filter_map(|label| {
                // Several zones are written as one value, `a__b`.
                let value = labels?.get(label.0)?;
                Some((label, value.split("__").map(str::trim).map(String::from).collect()))
            })
            .collect();
        (node_affinity.is_some() || !zones.is_empty()).then_some(Limit { volume, node_affinity, zones })
    }

    /// Why `node` cannot mount the volume, if it cannot.
    pub fn conflict(&self, node: &Node) -> Option<Conflict<'_>> {
        let empty = Default::default();
        let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
        let name = node.metadata.name.as_deref().unwrap_or_default();
        // kube-scheduler hands its match a Node with labels only, so that `matchFields` on
        // `metadata.name` matches no Node there; the name is what such a term means, and the kubelet
        // mounts the volume on the Node it names.
        if let Some(required) = &self.node_affinity
            && !selector_matches(required, labels, name)
        {
            return Some(Conflict::NodeAffinity { volume: &self.volume });
        }
        // As VolumeZone: a Node with no zone or region label at all is not refused.
        if !ZONE_LABELS.iter().any(|(key, _)| labels.contains_key(*key)) {
            return None;
        }
        self.zones.iter().find_map(|&((key, ga), ref values)| {
            let value = labels.get(key).or_else(|| labels.get(ga));
            let admitted = value.is_some_and(|value| values.contains(value));
            (!admitted).then_some(Conflict::Zone { volume: &self.volume, key })
        })
    }
}

/// Why a claim gives no volume to place the pod by.
enum Unready {
    Waits(String),
    Unsupported(String),
}

/// The PersistentVolume that claim `name`, of `volume`, is bound to.
fn bound_volume(
    pod: &WatchedPod,
    volume: &VolumeNeeds,
    name: &str,
    claims: &impl Claims,
) -> Result<Arc<PersistentVolume>, Unready> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let Some(claim) = claims.claim(namespace, name) else {
        return Err(Unready::Waits(format!("persistentvolumeclaim {name:?} not found")));
    };
    // An ephemeral volume's claim is the pod's own: one of that name made otherwise is not used.
    let owner = pod.metadata.uid.as_deref();
    let made_for_pod = || {
        let references = claim.metadata.owner_references.as_deref().unwrap_or_default();
        references.iter().any(|reference| reference.controller == Some(true) && Some(reference.uid.as_str()) == owner)
    };
    if volume.ephemeral.is_some() && !made_for_pod() {
        return Err(Unready::Waits(format!("persistentvolumeclaim {name:?} was not created for the pod")));
    }
    if claim.metadata.deletion_timestamp.is_some() {
        return Err(Unready::Waits(format!("persistentvolumeclaim {name:?} is being deleted")));
    }
    let spec = claim.spec.as_ref();
    let Some(pv) = spec.and_then(|spec| spec.volume_name.as_deref()).filter(|pv| !pv.is_empty()) else {
        let class = spec.and_then(|spec| spec.storage_class_name.as_deref()).filter(|class| !class.is_empty());
        let mode = class.and_then(|class| claims.class(class)).and_then(|class| class.volume_binding_mode.clone());
        return Err(match (class, mode.as_deref()) {
            (Some(class), Some("WaitForFirstConsumer")) => Unready::Unsupported(format!(
                "persistentvolumeclaim {name:?} is not bound, and its StorageClass {class} is WaitForFirstConsumer \
                 (it binds a volume only once a scheduler has chosen the pod's Node): sunk does not choose a \
                 volume's Node (name the volume in the claim's spec.volumeName, or use an Immediate StorageClass)"
            )),
            _ => Unready::Waits(format!("persistentvolumeclaim {name:?} is not bound yet")),
        });
    };
    // A claim named a volume (by its owner, or by the controller halfway through) is bound only once
    // the PersistentVolume controller says so, as kube-scheduler reads it: the volume may yet prove
    // to be another claim's.
    let annotations = claim.metadata.annotations.as_ref();
    if !annotations.is_some_and(|annotations| annotations.contains_key(BIND_COMPLETED)) {
        return Err(Unready::Waits(format!(
            "persistentvolumeclaim {name:?} is not bound yet (to persistentvolume {pv:?})"
        )));
    }
    claims.volume(pv).ok_or_else(|| {
        Unready::Waits(format!("persistentvolumeclaim {name:?} is bound to persistentvolume {pv:?}, not found"))
    })
}

fn volumes(pod: &WatchedPod) -> &[VolumeNeeds] {
    pod.spec.as_ref().and_then(|spec| spec.volumes.as_deref()).unwrap_or_default()
}

/// The claim a volume mounts, if it mounts one.
fn claim_name(pod: &WatchedPod, volume: &VolumeNeeds) -> Option<String> {
    if let Some(claim) = &volume.persistent_volume_claim {
        return Some(claim.claim_name.clone());
    }
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    volume.ephemeral.as_ref().map(|_| format!("{pod_name}-{}", volume.name))
}

/// `spec.volumes[2] (claim data)`: the volume, as a condition names it.
fn field(at: usize, volume: &VolumeNeeds) -> String {
    match &volume.persistent_volume_claim {
        Some(claim) => format!("spec.volumes[{at}] (claim {})", claim.claim_name),
        None => format!("spec.volumes[{at}] (ephemeral {})", volume.name),
    }
}

fn pv_name(pv: &PersistentVolume) -> &str {
    pv.metadata.name.as_deref().unwrap_or_default()
}

#[cfg(test)]
#[path = "volume_topology_tests.rs"]
mod tests;
