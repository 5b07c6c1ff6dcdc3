//! Who a Slurm node belongs to, kept as JSON in the node's `comment` so that every Slurm node maps
//! back to its pod, Node and NodeSet, even after a host restart or once the pod is gone.
//!
//! `slurmd --conf` takes only slurm.conf node parameters, and `Comment` is not one of them, so the
//! host writes the comment through slurmrestd once the node has registered.
//!
//! The record is also what makes a slurmd pod believable: anyone who may create a pod may label it
//! as a slurmd pod, or give it an ownerReference naming a NodeSet, but only Slurm's administrators
//! (and the NodeSet controller, through slurmrestd) can write a Slurm node's comment.

use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use serde::{Deserialize, Serialize};

use super::NodeSet;
use super::claims::NodeSetKey;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlurmNodeOwner {
    pub namespace: String,
    pub pod: String,
    /// The Kubernetes Node.
    pub node: String,
    pub nodeset: String,
    /// The pod's UID.
    pub uid: String,
    #[serde(default)]
    pub nodeset_uid: String,
}

impl SlurmNodeOwner {
    pub fn to_comment(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The owner recorded in a comment, if the comment is one of sunk's.
    pub fn from_comment(comment: &str) -> Option<Self> {
        serde_json::from_str(comment).ok()
    }

    pub fn nodeset_key(&self) -> NodeSetKey {
        NodeSetKey { namespace: self.namespace.clone(), name: self.nodeset.clone() }
    }

    /// Whether `pod` is the slurmd pod this record names: its namespace, its UID, and controlled by
    /// its NodeSet.
    pub fn names(&self, pod: &Pod) -> bool {
        controlling_nodeset(pod) == Some(self.nodeset.as_str())
            && pod.metadata.uid.as_deref() == Some(self.uid.as_str())
            && pod.metadata.namespace.as_deref() == Some(self.namespace.as_str())
    }
}

/// The NodeSet that controls `pod` (its controller ownerReference), if one does.
pub fn controlling_nodeset(pod: &Pod) -> Option<&str> {
    let controller = pod.metadata.owner_references.iter().flatten().find(|owner| owner.controller == Some(true))?;
    (controller.kind == NodeSet::kind(&()) && controller.api_version == NodeSet::api_version(&()))
        .then_some(controller.name.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_ignores_foreign_comments() {
        let owner = SlurmNodeOwner {
            namespace: "slurm".into(),
            pod: "cpu-worker-1".into(),
            node: "worker-1".into(),
            nodeset: "cpu".into(),
            uid: "u1".into(),
            nodeset_uid: "u0".into(),
        };
        let comment = owner.to_comment();
        assert!(comment.contains(r#""nodesetUid":"u0""#), "{comment}");
        assert_eq!(SlurmNodeOwner::from_comment(&comment), Some(owner.clone()));
        assert_eq!(owner.nodeset_key().to_string(), "slurm/cpu");
        assert_eq!(SlurmNodeOwner::from_comment("rack 4, bad fan"), None);
        assert_eq!(SlurmNodeOwner::from_comment(""), None);
    }
}
