//! Which of a gang job's nodes each member is bound to: one member per node, members already bound
//! keep their node, the others take the remaining nodes in order. The same inputs always give the same
//! answer, so members reconciled one by one (or after a restart) never pick the same node.

use std::collections::HashMap;

/// `members` in the link's order, the job's Slurm `nodes` in Slurm's order, and the Slurm node each
/// already bound member is on: the Slurm node of every member (none when there are too few nodes).
pub fn assign(members: &[String], nodes: &[String], bound: &HashMap<String, String>) -> HashMap<String, String> {
    let mut taken: Vec<&String> = Vec::new();
    let mut placed: HashMap<String, String> = HashMap::new();
    for member in members {
        if let Some(node) = bound.get(member).filter(|node| nodes.contains(node) && !taken.contains(node)) {
            taken.push(node);
            placed.insert(member.clone(), node.clone());
        }
    }
    let mut free = nodes.iter().filter(|node| !taken.contains(node));
    for member in members {
        if placed.contains_key(member) {
            continue;
        }
        match free.next() {
            Some(node) => placed.insert(member.clone(), node.clone()),
            None => break,
        };
    }
    placed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn one_member_per_node_in_order() {
        let placed = assign(&names(&["a", "b"]), &names(&["n1", "n2"]), &HashMap::new());
        assert_eq!(placed["a"], "n1");
        assert_eq!(placed["b"], "n2");
    }

    #[test]
    fn bound_members_keep_their_nodes() {
        let bound = HashMap::from([("a".to_string(), "n2".to_string())]);
        let placed = assign(&names(&["a", "b", "c"]), &names(&["n1", "n2", "n3"]), &bound);
        assert_eq!((placed["a"].as_str(), placed["b"].as_str(), placed["c"].as_str()), ("n2", "n1", "n3"));
    }

    #[test]
    fn too_few_nodes_leave_members_unplaced() {
        let placed = assign(&names(&["a", "b"]), &names(&["n1"]), &HashMap::new());
        assert_eq!(placed.len(), 1);
    }
}
