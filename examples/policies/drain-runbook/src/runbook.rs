//! Drain decisions whose reasons end with `runbook: <url>`.

use crate::sunk::policy::common::KeyValue;
use crate::sunk::policy::drain_types::{Condition, DrainDecision, NodeAction, NodeContext, NodeEvent};

const PREFIX: &str = "k8s: ";
/// Slurm keeps reasons as free text; sinfo shows them best short.
const MAX_REASON_BYTES: usize = 255;
const RUNBOOK_ANNOTATION: &str = "sunk.dev/runbook";
/// The runbook key for a cordon (conditions use their type).
const CORDON: &str = "Cordoned";
/// The runbook for causes the table does not list.
const FALLBACK: &str = "default";

/// Runbook URL per cause: a Node condition type, `Cordoned`, or `default`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Runbooks {
    entries: Vec<(String, String)>,
}

impl Runbooks {
    /// One `<cause>=<url>` per line; `#` starts a comment.
    pub fn parse(text: &str) -> Result<Runbooks, String> {
        let mut entries = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            match line.split_once('=') {
                Some((cause, url)) if !cause.trim().is_empty() && url.trim().starts_with("http") => {
                    entries.push((cause.trim().to_owned(), url.trim().to_owned()))
                }
                _ => return Err(format!("line {}: expected `<cause>=<http(s) url>`, got `{line}`", index + 1)),
            }
        }
        Ok(Runbooks { entries })
    }

    fn url(&self, cause: &str) -> Option<&str> {
        let find = |key: &str| self.entries.iter().find(|(k, _)| k == key).map(|(_, url)| url.as_str());
        find(cause).or_else(|| find(FALLBACK))
    }
}

pub fn on_node_event(runbooks: &Runbooks, event: &NodeEvent, node: &NodeContext) -> DrainDecision {
    match event {
        NodeEvent::Cordoned(cordon) => {
            let who = cordon.by.as_deref().filter(|who| !who.is_empty());
            let reason = who.map_or_else(|| format!("{PREFIX}cordoned"), |who| format!("{PREFIX}cordoned by {who}"));
            drain(reason, runbooks.url(CORDON))
        }
        NodeEvent::Uncordoned => resume_if_drained_for(node, &format!("{PREFIX}cordoned")),
        NodeEvent::ConditionChanged(change) if is_problem(&change.after) => {
            let condition = &change.after;
            let mut reason = format!("{PREFIX}{}={}", condition.type_, condition.status);
            if !condition.message.is_empty() {
                reason = format!("{reason}: {}", condition.message);
            }
            drain(reason, runbooks.url(&condition.type_))
        }
        NodeEvent::ConditionChanged(change) => resume_if_drained_for(node, &format!("{PREFIX}{}=", change.after.type_)),
        NodeEvent::PodTerminating(pod) => {
            drain(format!("{PREFIX}slurmd pod {}/{} terminating", pod.namespace, pod.name), None)
        }
        NodeEvent::LabelChanged(_) | NodeEvent::SlurmStateChanged(_) => keep(),
    }
}

/// `Ready` is healthy when True; every other condition (node-problem-detector style) is a problem when True.
fn is_problem(condition: &Condition) -> bool {
    match condition.type_.as_str() {
        "Ready" => condition.status != "True",
        "NetworkUnavailable" => false,
        _ => condition.status == "True",
    }
}

/// Drains with `reason`, the runbook appended so it survives the cut to Slurm's length, and the link
/// on the slurmd pod too.
fn drain(reason: String, url: Option<&str>) -> DrainDecision {
    let Some(url) = url else {
        return DrainDecision { action: NodeAction::Drain(cut(&reason, MAX_REASON_BYTES)), annotations: vec![] };
    };
    let suffix = format!(" (runbook: {url})");
    let reason = cut(&reason, MAX_REASON_BYTES.saturating_sub(suffix.len())) + &suffix;
    let annotations = vec![KeyValue { key: RUNBOOK_ANNOTATION.into(), value: url.into() }];
    DrainDecision { action: NodeAction::Drain(reason), annotations }
}

/// Resumes only a drain sunk set for this very cause; clears the runbook link.
fn resume_if_drained_for(node: &NodeContext, reason_prefix: &str) -> DrainDecision {
    if !node.slurm_reason.as_deref().is_some_and(|reason| reason.starts_with(reason_prefix)) {
        return keep();
    }
    let annotations = vec![KeyValue { key: RUNBOOK_ANNOTATION.into(), value: String::new() }];
    DrainDecision { action: NodeAction::Resume, annotations }
}

fn keep() -> DrainDecision {
    DrainDecision { action: NodeAction::Keep, annotations: vec![] }
}

/// `text` cut to at most `max` bytes on a character boundary.
fn cut(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sunk::policy::drain_types::{ConditionChange, Cordon};

    fn node(reason: Option<&str>) -> NodeContext {
        NodeContext {
            kube_node: "n1".into(),
            slurm_node: "slurmd-n1".into(),
            labels: vec![],
            conditions: vec![],
            unschedulable: false,
            slurm_state: vec!["IDLE".into()],
            slurm_reason: reason.map(Into::into),
        }
    }

    fn condition(type_: &str, status: &str, message: &str) -> NodeEvent {
        let after =
            Condition { type_: type_.into(), status: status.into(), reason: String::new(), message: message.into() };
        NodeEvent::ConditionChanged(ConditionChange { before: None, after })
    }

    fn runbooks() -> Runbooks {
        Runbooks::parse(
            "# cause=url\nGpuXidError=https://runbooks.example/gpu-xid\ndefault=https://runbooks.example/node\n",
        )
        .unwrap()
    }

    #[test]
    fn a_problem_drains_with_its_runbook() {
        let decision = on_node_event(&runbooks(), &condition("GpuXidError", "True", "Xid 79"), &node(None));
        let reason = "k8s: GpuXidError=True: Xid 79 (runbook: https://runbooks.example/gpu-xid)";
        assert_eq!(decision.action, NodeAction::Drain(reason.into()));
        assert_eq!(decision.annotations[0].value, "https://runbooks.example/gpu-xid");
        let unlisted = on_node_event(&runbooks(), &condition("Ready", "False", ""), &node(None));
        assert_eq!(
            unlisted.action,
            NodeAction::Drain("k8s: Ready=False (runbook: https://runbooks.example/node)".into())
        );
    }

    #[test]
    fn a_long_message_is_cut_but_the_link_is_kept() {
        let decision = on_node_event(&runbooks(), &condition("GpuXidError", "True", &"x".repeat(400)), &node(None));
        let NodeAction::Drain(reason) = decision.action else { panic!() };
        assert_eq!(reason.len(), MAX_REASON_BYTES);
        assert!(reason.ends_with("(runbook: https://runbooks.example/gpu-xid)"));
    }

    #[test]
    fn only_a_drain_for_the_same_cause_is_resumed() {
        let healed = condition("GpuXidError", "False", "");
        let ours = node(Some("k8s: GpuXidError=True: Xid 79 (runbook: https://runbooks.example/gpu-xid)"));
        assert_eq!(on_node_event(&runbooks(), &healed, &ours).action, NodeAction::Resume);
        let admin = node(Some("bad DIMM, ticket 4711"));
        assert_eq!(on_node_event(&runbooks(), &healed, &admin).action, NodeAction::Keep);
        let cordoned = node(Some("k8s: cordoned by alice"));
        assert_eq!(on_node_event(&runbooks(), &NodeEvent::Uncordoned, &cordoned).action, NodeAction::Resume);
        let cordon = NodeEvent::Cordoned(Cordon { by: Some("alice".into()) });
        assert_eq!(
            on_node_event(&Runbooks::default(), &cordon, &node(None)).action,
            NodeAction::Drain("k8s: cordoned by alice".into())
        );
    }

    #[test]
    fn a_bad_table_names_its_line() {
        assert!(Runbooks::parse("GpuXidError=https://x\nnonsense\n").unwrap_err().contains("line 2"));
        assert!(Runbooks::parse("Ready=ftp://x\n").is_err());
    }
}
