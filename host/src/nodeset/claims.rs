//! A Node selected by several NodeSets gets one slurmd pod. The winner is deterministic: a NodeSet
//! whose pod already runs there keeps it (replacing a running slurmd would drain it for nothing),
//! otherwise the oldest NodeSet, then the first by namespace and name.

use std::fmt;

use k8s_openapi::jiff::Timestamp;

/// A NodeSet by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeSetKey {
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for NodeSetKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A NodeSet that selects a Node.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub nodeset: NodeSetKey,
    pub created: Option<Timestamp>,
    /// Its slurmd pod runs on the Node (not being deleted).
    pub holds_pod: bool,
}

/// The NodeSet that gets the Node.
pub fn winner(claims: &[Claim]) -> Option<&Claim> {
    claims.iter().min_by(|a, b| {
        let rank = |claim: &Claim| (!claim.holds_pod, claim.created.is_none(), claim.created);
        rank(a).cmp(&rank(b)).then_with(|| a.nodeset.cmp(&b.nodeset))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(name: &str, created: Option<i64>, holds_pod: bool) -> Claim {
        Claim {
            nodeset: NodeSetKey { namespace: "ns".into(), name: name.into() },
            created: created.map(|seconds| Timestamp::from_second(seconds).unwrap()),
            holds_pod,
        }
    }

    fn won(claims: &[Claim]) -> String {
        winner(claims).unwrap().nodeset.name.clone()
    }

    #[test]
    fn the_oldest_wins_then_the_first_name() {
        assert_eq!(won(&[claim("b", Some(10), false), claim("a", Some(20), false)]), "b");
        assert_eq!(won(&[claim("b", Some(10), false), claim("a", Some(10), false)]), "a");
        assert_eq!(won(&[claim("a", None, false), claim("b", Some(10), false)]), "b");
        assert!(winner(&[]).is_none());
    }

    #[test]
    fn the_nodeset_whose_pod_runs_there_keeps_the_node() {
        assert_eq!(won(&[claim("old", Some(1), false), claim("young", Some(99), true)]), "young");
        assert_eq!(won(&[claim("old", Some(1), true), claim("young", Some(99), true)]), "old");
    }

    #[test]
    fn the_winner_does_not_depend_on_order() {
        let claims = [claim("c", Some(5), false), claim("a", Some(5), false), claim("b", Some(3), false)];
        let mut reversed = claims.clone();
        reversed.reverse();
        assert_eq!(won(&claims), won(&reversed));
    }
}
