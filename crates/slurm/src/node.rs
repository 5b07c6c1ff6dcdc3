//! Slurm nodes as slurmrestd (v0.0.42) lists them, and the updates sunk makes to them.

use serde::{Deserialize, Deserializer, Serialize};

use super::model::{Envelope, NoValue};

/// One node as listed by `GET /nodes`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Node {
    pub name: String,
    /// Base state first (`IDLE`, `ALLOCATED`, `MIXED`, `DOWN`, ...), then flags (`DRAIN`, `COMPLETING`,
    /// `DYNAMIC_NORM`, `NOT_RESPONDING`, ...).
    #[serde(default)]
    pub state: Vec<String>,
    /// The drain or down reason, empty when there is none. It survives a resume: test the DRAIN flag.
    #[serde(default)]
    pub reason: String,
    /// Who set the reason.
    #[serde(default)]
    pub reason_set_by_user: String,
    #[serde(default)]
    pub comment: String,
    #[serde(default, deserialize_with = "number")]
    pub cpus: u64,
    /// MiB.
    #[serde(default, deserialize_with = "number")]
    pub real_memory: u64,
    /// e.g. `gpu:h100:8`.
    #[serde(default)]
    pub gres: String,
    #[serde(default, deserialize_with = "list_or_csv")]
    pub features: Vec<String>,
    #[serde(default)]
    pub address: String,
    /// The host name slurmd registered from (a slurmd pod's name).
    #[serde(default)]
    pub hostname: String,
    #[serde(default, deserialize_with = "list_or_csv")]
    pub partitions: Vec<String>,
    /// CPUs jobs hold now.
    #[serde(default, deserialize_with = "number")]
    pub alloc_cpus: u64,
    /// MiB jobs hold now.
    #[serde(default, deserialize_with = "number")]
    pub alloc_memory: u64,
    /// e.g. `gpu:h100:1(IDX:0)`.
    #[serde(default)]
    pub gres_used: String,
}

impl Node {
    pub fn flags(&self) -> NodeFlags<'_> {
        NodeFlags(&self.state)
    }
}

/// Questions about a node's state flags.
#[derive(Debug, Clone, Copy)]
pub struct NodeFlags<'a>(&'a [String]);

impl NodeFlags<'_> {
    pub fn has(&self, flag: &str) -> bool {
        self.0.iter().any(|state| state.eq_ignore_ascii_case(flag))
    }

    /// The base state (`IDLE`, `ALLOCATED`, `MIXED`, `DOWN`, `ERROR`, `FUTURE`, `UNKNOWN`).
    pub fn base(&self) -> &str {
        self.0.first().map(String::as_str).unwrap_or("UNKNOWN")
    }

    /// A job holds the node, or is still cleaning up on it.
    pub fn is_busy(&self) -> bool {
        self.has("ALLOCATED") || self.has("MIXED") || self.has("COMPLETING")
    }

    /// Holds no running job, only ended ones Slurm is still cleaning up after (their epilogs).
    pub fn only_completing(&self) -> bool {
        self.has("COMPLETING") && !self.has("ALLOCATED") && !self.has("MIXED")
    }

    /// Drain requested and not being undone.
    pub fn is_draining(&self) -> bool {
        self.has("DRAIN") && !self.has("UNDRAIN")
    }

    /// Drained and nothing left running: the node can go without killing anything.
    pub fn is_drained(&self) -> bool {
        self.is_draining() && !self.is_busy()
    }

    /// Created by `slurmd -Z` (or `scontrol create`), so it can be deleted.
    pub fn is_dynamic(&self) -> bool {
        self.has("DYNAMIC_NORM") || self.has("DYNAMIC_FUTURE")
    }

    /// Registered and answering: able to run jobs, drains aside.
    pub fn is_responsive(&self) -> bool {
        !matches!(self.base(), "DOWN" | "FUTURE" | "UNKNOWN" | "ERROR")
            && !self.has("NOT_RESPONDING")
            && !self.has("INVALID_REG")
            && !self.has("INVALID")
    }
}

/// `features` is a list in v0.0.42, a comma-separated string in older parsers.
fn list_or_csv<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum ListOrCsv {
        List(Vec<String>),
        Csv(String),
        Null(()),
    }
    Ok(match ListOrCsv::deserialize(deserializer)? {
        ListOrCsv::List(list) => list,
        ListOrCsv::Csv(text) => text.split(',').filter(|item| !item.is_empty()).map(str::to_owned).collect(),
        ListOrCsv::Null(()) => Vec::new(),
    })
}

/// A count, whether slurmrestd sends it bare or as `{"set": true, "number": N}`; 0 when unset.
fn number<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Number {
        Bare(u64),
        Wrapped(NoValue),
        Null(()),
    }
    Ok(match Number::deserialize(deserializer)? {
        Number::Bare(number) => number,
        Number::Wrapped(value) => value.get().unwrap_or(0),
        Number::Null(()) => 0,
    })
}

/// A change to one node (`update_node_msg`); unset fields are left alone.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NodeUpdate {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub state: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

impl NodeUpdate {
    pub fn drain(reason: &str) -> Self {
        Self { state: vec!["DRAIN".into()], reason: Some(reason.to_owned()), comment: None }
    }

    /// Marks the node DOWN: slurmctld ends what still runs there and lets go of completing jobs.
    pub fn down(reason: &str) -> Self {
        Self { state: vec!["DOWN".into()], reason: Some(reason.to_owned()), comment: None }
    }

    /// Undoes a drain. UNDRAIN (unlike RESUME) is idempotent and leaves DOWN alone.
    pub fn undrain() -> Self {
        Self { state: vec!["UNDRAIN".into()], reason: None, comment: None }
    }

    pub fn comment(comment: &str) -> Self {
        Self { comment: Some(comment.to_owned()), ..Default::default() }
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct NodesResponse {
    /// Required: a listing without its list is unreadable, never "no nodes".
    pub nodes: Vec<Node>,
    #[serde(default)]
    pub last_update: NoValue,
    #[serde(flatten)]
    pub envelope: Envelope,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(state: &[&str]) -> Node {
        Node { name: "n".into(), state: state.iter().map(|s| s.to_string()).collect(), ..Default::default() }
    }

    #[test]
    fn reads_a_v0_0_42_node() {
        let json = r#"{"name":"n1","state":["IDLE","DRAIN","DYNAMIC_NORM"],"reason":"k8s: x","comment":"{}",
            "cpus":4,"real_memory":8000,"gres":"gpu:h100:2","features":["a","b"],"address":"10.0.0.1",
            "partitions":["batch"],"unknown_field":1}"#;
        let node: Node = serde_json::from_str(json).unwrap();
        assert_eq!(node.features, ["a", "b"]);
        assert_eq!(node.cpus, 4);
        assert!(node.flags().is_drained());
        assert!(node.flags().is_dynamic());
        let csv: Node = serde_json::from_str(r#"{"name":"n2","features":"a,b"}"#).unwrap();
        assert_eq!(csv.features, ["a", "b"]);
        let wrapped: Node =
            serde_json::from_str(r#"{"name":"n3","cpus":{"set":true,"number":8},"features":null}"#).unwrap();
        assert_eq!((wrapped.cpus, wrapped.real_memory), (8, 0));
    }

    #[test]
    fn drained_means_drain_and_nothing_running() {
        assert!(node(&["IDLE", "DRAIN"]).flags().is_drained());
        assert!(!node(&["ALLOCATED", "DRAIN"]).flags().is_drained());
        assert!(!node(&["MIXED", "DRAIN"]).flags().is_drained());
        assert!(!node(&["IDLE", "DRAIN", "COMPLETING"]).flags().is_drained());
        assert!(!node(&["IDLE", "DRAIN", "UNDRAIN"]).flags().is_drained());
        assert!(!node(&["IDLE"]).flags().is_drained());
        assert!(node(&["DOWN", "DRAIN"]).flags().is_drained());
    }

    #[test]
    fn responsive_excludes_down_and_unregistered_nodes() {
        assert!(node(&["IDLE"]).flags().is_responsive());
        assert!(node(&["ALLOCATED", "DRAIN"]).flags().is_responsive());
        assert!(!node(&["DOWN"]).flags().is_responsive());
        assert!(!node(&["IDLE", "NOT_RESPONDING"]).flags().is_responsive());
        assert!(!node(&["FUTURE"]).flags().is_responsive());
        assert!(!node(&[]).flags().is_responsive());
    }

    #[test]
    fn updates_leave_unset_fields_out() {
        let json = serde_json::to_value(NodeUpdate::drain("k8s: x")).unwrap();
        assert_eq!(json, serde_json::json!({"state": ["DRAIN"], "reason": "k8s: x"}));
        let json = serde_json::to_value(NodeUpdate::comment("{}")).unwrap();
        assert_eq!(json, serde_json::json!({"comment": "{}"}));
    }
}
