//! An example preemption policy: like sunk's bundled default (lowest priority first, fewest victims,
//! never at or above the waiting work's priority), but the jobs of the Slurm accounts named in the
//! module's configuration are never preempted; the next-lowest work goes instead. See
//! [`protect::Protected::parse`] for the configuration and [`protect::choose`] for the choice.

mod protect;

// The generated export glue passes the flattened arguments of `choose-victims` one by one.
#[allow(clippy::too_many_arguments)]
mod bindings {
    wit_bindgen::generate!({
        world: "preemption",
        path: "../../../wit",
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
        let protected = match host::config().map(|text| protect::Protected::parse(&text)) {
            Some(Ok(protected)) => protected,
            // Preempting a protected job is the costly mistake: with a list that cannot be read, preempt
            // nobody, and say why where the operator looks (the decision's reason, in Events).
            Some(Err(problem)) => {
                host::log(LogLevel::Warn, &format!("unreadable account list: {problem}"));
                return PreemptionDecision {
                    victims: vec![],
                    reason: format!("preempting nobody: the protected-accounts list is unreadable ({problem})"),
                };
            }
            None => protect::Protected::default(),
        };
        protect::choose(&protected, &preemptor, &nodes, &candidates)
    }
}

bindings::export!(Policy with_types_in bindings);
