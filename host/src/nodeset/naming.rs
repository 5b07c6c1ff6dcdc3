//! Names and labels: the Slurm node of a Kubernetes Node, the pod that runs it, and how pods say
//! whose they are.

use sha2::{Digest, Sha256};

pub use crate::vocabulary::{
    CONF_ANNOTATION, DRAIN_REASON_ANNOTATION, DRAIN_SINCE_ANNOTATION, NODESET_FINALIZER, NODESET_LABEL, REVISION_LABEL,
    SLURM_NODE_LABEL,
};

/// Longest Slurm node name (a host name label).
const MAX_NAME: usize = 63;
const HASH_CHARS: usize = 8;

/// The Slurm node name of a Kubernetes Node: the Node's name when it is already a valid, short host
/// name (lowercase letters, digits, '-'); otherwise a cleaned, shortened name with a hash of the
/// original, so that two Nodes never share a Slurm node.
pub fn slurm_node_name(kube_node: &str) -> String {
    bounded(kube_node, MAX_NAME)
}

/// The slurmd pod's name: `<nodeset>-<slurm node>`, kept to a DNS label.
pub fn pod_name(nodeset: &str, slurm_node: &str) -> String {
    bounded(&format!("{nodeset}-{slurm_node}"), MAX_NAME)
}

fn bounded(name: &str, max: usize) -> String {
    let clean: String = name
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' })
        .collect();
    let clean = clean.trim_matches('-');
    if clean == name && !clean.is_empty() && clean.len() <= max {
        return clean.to_owned();
    }
    let keep = max - HASH_CHARS - 1;
    let head = clean[..clean.len().min(keep)].trim_end_matches('-');
    let hash = &short_hash(name.as_bytes())[..HASH_CHARS];
    if head.is_empty() { format!("n-{hash}") } else { format!("{head}-{hash}") }
}

/// Hex sha256 of `bytes`, shortened to what a label needs.
pub fn short_hash(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().take(8).map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_node_name_is_kept() {
        assert_eq!(slurm_node_name("worker-1"), "worker-1");
        assert_eq!(pod_name("gpu", "worker-1"), "gpu-worker-1");
    }

    #[test]
    fn other_names_are_cleaned_and_hashed_so_they_never_collide() {
        let dotted = slurm_node_name("ip-10-0-0-1.ec2.internal");
        assert!(dotted.starts_with("ip-10-0-0-1-ec2-internal-"), "{dotted}");
        assert_ne!(slurm_node_name("a.b"), slurm_node_name("a-b"));
        assert_ne!(slurm_node_name("Node1"), slurm_node_name("node1"));
        let long = "x".repeat(200);
        assert_eq!(slurm_node_name(&long).len(), 63);
        assert_ne!(slurm_node_name(&long), slurm_node_name(&"x".repeat(201)));
        assert!(slurm_node_name("...").starts_with("n-"));
        assert_eq!(slurm_node_name("a.b"), slurm_node_name("a.b"));
    }

    #[test]
    fn pod_names_stay_dns_labels() {
        let name = pod_name(&"n".repeat(60), &"w".repeat(60));
        assert!(name.len() <= 63);
        assert!(name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'));
    }
}
