//! sunk's bundled preemption policy: lowest priority first, fewest victims, never a job at or above the
//! preemptor's priority.
//!
//! The choice is a plain function over the generated WIT records ([`choose::choose_victims`]),
//! unit-tested natively; this file is only the glue to the `preemption` world.

mod choose;

// The generated export glue passes the flattened arguments of `choose-victims` one by one.
#[allow(clippy::too_many_arguments)]
mod bindings {
    wit_bindgen::generate!({
    world: "preemption",
    path: "../../wit",
        additional_derives: [PartialEq, Eq],
        pub_export_macro: true,
    });
}

pub(crate) use bindings::sunk;
use bindings::sunk::policy::host::{self, LogLevel};
use bindings::{Candidate, Guest, Node, PreemptionDecision, Preemptor};

struct Policy;

impl Guest for Policy {
    fn choose_victims(preemptor: Preemptor, nodes: Vec<Node>, candidates: Vec<Candidate>) -> PreemptionDecision {
        report_panics_to_host();
        choose::choose_victims(&preemptor, &nodes, &candidates)
    }
}

bindings::export!(Policy with_types_in bindings);

/// Policies are built with `panic = "abort"`: the host only sees a trap, so hand it the message first.
fn report_panics_to_host() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| host::log(LogLevel::Error, &format!("preemption panicked: {info}"))));
    });
}
