//! A hold job's link: the Slurm node on which it holds what pods outside Slurm use there (see
//! `pool::holds`). It names no pod: the pods it stands for come and go, and it holds their sum.

use crate::vocabulary::HOLD_LINK;

/// The `admin_comment` of a hold job on `slurm_node`.
pub fn hold_link(slurm_node: &str) -> String {
    format!("{HOLD_LINK}{slurm_node}")
}

/// The Slurm node a hold job's `admin_comment` names; none for any other job.
pub fn held_node(admin_comment: &str) -> Option<&str> {
    let rest = admin_comment.strip_prefix(HOLD_LINK)?;
    let node = rest.split_once(';').map_or(rest, |(node, _marks)| node);
    (!node.is_empty()).then_some(node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::link::{Installation, PodKey};

    #[test]
    fn a_hold_link_names_its_node_and_no_pod() {
        let signed = Installation::new("sunk", "cluster").sign(hold_link("kube-node-1"));
        assert_eq!(signed, "sunk.dev/hold=kube-node-1;by=sunk@cluster");
        assert_eq!(held_node(&signed), Some("kube-node-1"));
        assert_eq!(PodKey::from_link(&signed), None);
        for other in ["", "sunk.dev/hold=", "sunk.dev/pod=ml/a/u1", "rack 4"] {
            assert_eq!(held_node(other), None, "{other:?}");
        }
    }
}
