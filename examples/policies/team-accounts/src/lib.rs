//! An example job-mapper policy: every pod must carry a `team` label, and the team picks the Slurm
//! account and QOS its placeholder job is charged to. The table comes from the module's configuration
//! (see [`teams::Table::parse`]), or a built-in one when the operator gives none.

mod teams;

wit_bindgen::generate!({
    world: "job-mapper",
    path: "../../../wit",
});

use sunk::policy::host::{self, LogLevel};

struct Policy;

impl Guest for Policy {
    fn map_pod(pod: Pod, cluster: Cluster) -> Mapping {
        let table = match host::config() {
            Some(text) => match teams::Table::parse(&text) {
                Ok(table) => table,
                // A broken table must not send pods to the wrong account: turn every pod down, saying why.
                Err(problem) => return teams::bad_config(&problem),
            },
            None => teams::Table::built_in(),
        };
        let mapping = teams::map_pod(&table, &pod, &cluster);
        if let Mapping::Reject(rejection) = &mapping {
            host::log(LogLevel::Debug, &format!("rejected {}/{}: {}", pod.namespace, pod.name, rejection.message));
        }
        mapping
    }
}

export!(Policy);
