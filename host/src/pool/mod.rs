//! One pool, held once: every CPU, byte and GPU of a Node that runs a Slurm node is held by exactly
//! one party, a Slurm job (sunk's pods hold theirs through their placeholders) or a pod outside
//! Slurm. The ledger draws both views of a Node (`ledger`, pure); the auditor compares them on every
//! poll and says where they disagree (`auditor`); hold jobs hold in Slurm what pods outside it use
//! (`holds`, pure). Nodes that run Slurm nodes are tainted against other schedulers (`taints`) and
//! named for the chart's admission policy (`node_list`).

mod auditor;
mod holds;
mod ledger;
mod metrics;
mod node_list;
mod taints;

pub use auditor::{CONDITION, Config, HoldKeeping, run, watch_bound_pods};
pub use holds::{HoldJob, by_node as hold_jobs_by_node, running as held_by_running_holds};
pub use ledger::{Amounts, Finding, NodeLedger, OutsidePod, Resource};
pub use metrics::PoolMetrics;
pub use node_list::NodeList;
