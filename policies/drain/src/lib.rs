//! sunk's bundled drain policy: turns a node event into drain / resume / keep with a `k8s:` reason,
//! and mirrors Slurm's view of the node onto the slurmd pod as annotations.
//!
//! The decision is a plain function over the generated WIT records ([`decide::on_node_event`]), unit-tested
//! natively; this file is only the glue to the `drain` world.

mod decide;

wit_bindgen::generate!({
    world: "drain",
    path: "../../wit",
    additional_derives: [PartialEq, Eq],
});

use sunk::policy::host::{self, LogLevel};

struct Policy;

impl Guest for Policy {
    fn on_node_event(event: NodeEvent, node: NodeContext) -> DrainDecision {
        report_panics_to_host();
        decide::on_node_event(&event, &node)
    }
}

export!(Policy);

/// Policies are built with `panic = "abort"`: the host only sees a trap, so hand it the message first.
fn report_panics_to_host() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| host::log(LogLevel::Error, &format!("drain panicked: {info}"))));
    });
}
