//! What the Syncer does to one Slurm node in one pass: drain it, resume it, or leave it. Pure; the
//! policy is asked through `ask`.
//!
//! Ownership: sunk owns only drains whose reason starts with `k8s:`. A node drained or down for any
//! other reason (an administrator's, Slurm's own) is never drained over, resumed or re-worded: what
//! sunk would have written is reported as withheld instead. A drain the NodeSet controller set for a
//! pod it removes (the pod carries its mark) is the NodeSet's to undo.
//!
//! A drain or resume decided on a listing is decided again on the node as Slurm has it right before
//! the write ([`writes`]): a listing can predate an administrator's drain by a poll.

use crate::policy::{DrainDecision, KeyValue, NodeAction, NodeEvent, PolicyError};
use crate::slurm;
use crate::vocabulary::{HOST_OWNED_ANNOTATIONS, is_owned_drain, owned_drain};

use super::causes::Cause;

/// What one Syncer pass does to a Slurm node.
#[derive(Debug, Clone, PartialEq)]
pub enum SyncStep {
    Nothing,
    Drain {
        reason: String,
        /// The cause's key, recorded on the pod so the drain can be undone for that cause only.
        cause: String,
        /// Slurm had this very drain undone while its cause persists.
        reapplied: bool,
    },
    Resume {
        cause: Option<String>,
    },
    /// A drain or resume was due, but someone else holds the node ([`held_by_another`]).
    Withheld(Withheld),
}

/// What the Syncer would have written to a node someone else holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Withheld {
    /// A cause (its key) wants the node drained.
    Drain { cause: String },
    /// The cause sunk drained for (its key) cleared, but sunk's drain was replaced by another's.
    Resume { cause: String },
}

/// Whether `action` writes to Slurm, and so must be decided again on the node as it is right then.
pub fn writes(action: &SyncStep) -> bool {
    matches!(action, SyncStep::Drain { .. } | SyncStep::Resume { .. })
}

/// Whether the node is drained, or down, for a reason sunk did not write: an administrator's
/// (`scontrol update state=drain reason="bad dimm"`) or Slurm's own (`Not responding`). A down node
/// with no reason has none to overwrite.
pub fn held_by_another(node: &slurm::Node) -> bool {
    let flags = node.flags();
    let down_for_a_reason = flags.base() == "DOWN" && !node.reason.is_empty();
    (flags.is_draining() || down_for_a_reason) && !is_owned_drain(&node.reason)
}

/// The decision, and the annotations the policy asked for on the slurmd pod.
#[derive(Debug, Clone, PartialEq)]
pub struct Decided {
    pub action: SyncStep,
    pub annotations: Vec<KeyValue>,
    /// Keys the policy asked to write that are the host's own ([`HOST_OWNED_ANNOTATIONS`]): not written.
    pub refused_annotations: Vec<String>,
}

/// How current the Slurm node the decision rests on is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// From a listing asked for within the node cache's freshness bound.
    Fresh,
    /// From the last good listing, older than that bound because its successor is slow to come
    /// (slurmctld busy with 10,000 pending jobs), with no failed poll since.
    Stale,
}

pub struct DecideInput<'a> {
    pub causes: &'a [Cause],
    pub slurm: &'a slurm::Node,
    pub view: View,
    /// The cause the Syncer last drained the node for (from the pod), if any.
    pub drained_for: Option<&'a str>,
    /// The event that clears `drained_for`, as the Node is now.
    pub cleared: Option<NodeEvent>,
    /// The NodeSet controller is removing the pod and owns the node's drain meanwhile.
    pub nodeset_owned: bool,
}

pub fn decide(
    input: &DecideInput,
    ask: impl FnMut(&NodeEvent) -> Result<DrainDecision, PolicyError>,
) -> Result<Decided, PolicyError> {
    let (action, asked) = decide_action(input, ask)?;
    // A write goes ahead on a stale view, as on a fresh one: it is decided again on the node read
    // alone right before it ([`writes`]), which shows anyone else's drain. A withheld resume writes
    // nothing to be read again: it waits for a fresh view that still shows the drain that holds it.
    let action = match (input.view, action) {
        (View::Stale, SyncStep::Withheld(Withheld::Resume { .. })) => SyncStep::Nothing,
        (_, action) => action,
    };
    let (annotations, refused): (Vec<KeyValue>, Vec<KeyValue>) =
        asked.into_iter().partition(|kv| !HOST_OWNED_ANNOTATIONS.contains(&kv.key.as_str()));
    Ok(Decided { action, annotations, refused_annotations: refused.into_iter().map(|kv| kv.key).collect() })
}

/// The action, and every annotation the policy asked for.
fn decide_action(
    input: &DecideInput,
    mut ask: impl FnMut(&NodeEvent) -> Result<DrainDecision, PolicyError>,
) -> Result<(SyncStep, Vec<KeyValue>), PolicyError> {
    let mut annotations = Vec::new();
    let mut wanted: Option<(String, &Cause)> = None;
    for cause in input.causes {
        let decision = ask(&cause.event)?;
        annotations.extend(decision.annotations);
        if let (NodeAction::Drain(reason), None) = (decision.action, &wanted) {
            wanted = Some((owned_drain(reason), cause));
        }
    }
    let drained = input.slurm.flags().is_draining();
    let reason = input.slurm.reason.as_str();
    if input.nodeset_owned {
        return Ok((SyncStep::Nothing, annotations));
    }
    let action = match wanted {
        Some((wanted, _)) if drained && reason == wanted => SyncStep::Nothing,
        Some((wanted, cause)) => SyncStep::Drain {
            // The pod records that sunk drained for this very cause, yet Slurm is not drained: it was
            // resumed behind sunk's back. Not the reason: Slurm clears it when the slurmd registers again.
            reapplied: !drained && input.drained_for == Some(cause.key.as_str()),
            reason: wanted,
            cause: cause.key.clone(),
        },
        None if !drained => SyncStep::Nothing,
        None => match &input.cleared {
            Some(event) => {
                let decision = ask(event)?;
                annotations.extend(decision.annotations);
                match decision.action {
                    NodeAction::Resume => SyncStep::Resume { cause: input.drained_for.map(str::to_owned) },
                    NodeAction::Keep | NodeAction::Drain(_) => SyncStep::Nothing,
                }
            }
            // No cause left and none recorded: nothing of sunk's keeps the node drained.
            None => SyncStep::Resume { cause: None },
        },
    };
    Ok((unless_held_by_another(action, input.slurm), annotations))
}

/// `action`, or what it withholds when someone else holds the node. A resume for no recorded cause
/// is no resume at all there: sunk never drained it.
fn unless_held_by_another(action: SyncStep, node: &slurm::Node) -> SyncStep {
    if !held_by_another(node) {
        return action;
    }
    match action {
        SyncStep::Drain { cause, .. } => SyncStep::Withheld(Withheld::Drain { cause }),
        SyncStep::Resume { cause: Some(cause) } => SyncStep::Withheld(Withheld::Resume { cause }),
        _ => SyncStep::Nothing,
    }
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
