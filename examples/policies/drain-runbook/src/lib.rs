//! An example drain policy: a node problem drains the Slurm node with a reason that links the runbook
//! for that problem, so whoever reads `sinfo -R` at 3 a.m. knows what to do. The runbooks come from the
//! module's configuration (see [`runbook::Runbooks::parse`]).

mod runbook;

wit_bindgen::generate!({
    world: "drain",
    path: "../../../wit",
    additional_derives: [PartialEq, Eq],
});

use sunk::policy::host::{self, LogLevel};

struct Policy;

impl Guest for Policy {
    fn on_node_event(event: NodeEvent, node: NodeContext) -> DrainDecision {
        let runbooks = match host::config().map(|text| runbook::Runbooks::parse(&text)) {
            Some(Ok(runbooks)) => runbooks,
            Some(Err(problem)) => {
                // Still drain on problems, without links: a broken table must not hide a sick node.
                host::log(LogLevel::Warn, &format!("ignoring the runbook table: {problem}"));
                runbook::Runbooks::default()
            }
            None => runbook::Runbooks::default(),
        };
        runbook::on_node_event(&runbooks, &event, &node)
    }
}

export!(Policy);
