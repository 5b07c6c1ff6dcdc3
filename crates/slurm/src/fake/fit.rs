//! Where the fake Slurm starts its pending jobs: first fit, highest priority first, on nodes that are
//! responsive, not draining, in the job's partition and allowed by its node lists.

use std::collections::BTreeMap;

use super::{World, node_names};
use crate::{JobDescription, JobState, NoValue, Node};

/// What one job needs: `nodes` nodes with `cpus_per_node` free CPUs each.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Demand {
    nodes: usize,
    pub(super) cpus_per_node: u64,
    partition: Option<String>,
    required: Vec<String>,
    pub(super) excluded: Vec<String>,
}

impl Demand {
    pub(super) fn of(description: &JobDescription) -> Self {
        let tasks_per_node = u64::from(description.tasks_per_node.unwrap_or(1).max(1));
        Self {
            nodes: description.minimum_nodes.unwrap_or(1).max(1) as usize,
            cpus_per_node: u64::from(description.cpus_per_task.max(1)) * tasks_per_node,
            partition: description.partition.clone(),
            required: node_names(&description.required_nodes),
            excluded: node_names(&description.excluded_nodes),
        }
    }

    fn allows(&self, node: &Node) -> bool {
        let flags = node.flags();
        flags.is_responsive()
            && !flags.is_draining()
            && self.partition.as_ref().is_none_or(|p| node.partitions.contains(p))
            && (self.required.is_empty() || self.required.contains(&node.name))
            && !self.excluded.contains(&node.name)
    }
}

impl World {
    /// Starts every pending job that fits now, highest priority first, and brings the nodes' states
    /// and allocated CPUs up to date.
    pub(super) fn start_what_fits(&mut self) {
        let mut pending: Vec<_> = self
            .jobs
            .values()
            .filter(|job| job.state() == JobState::Pending && !super::held(job))
            .map(|job| (std::cmp::Reverse(job.priority.get().unwrap_or(0)), job.job_id))
            .collect();
        pending.sort();
        for (_, id) in pending {
            if let Some(nodes) = self.fit(id) {
                let job = self.jobs.get_mut(&id).expect("a listed job");
                if job.user_id.is_some_and(|uid| self.unknown_users.contains(&uid)) {
                    // As slurmctld (24.11, 26.05) leaves a job it cannot make a credential for.
                    job.state_reason = "JobHeldAdmin".into();
                    job.system_comment = "slurm_cred_create failure, holding job.".into();
                    job.priority = NoValue::of(0);
                    continue;
                }
                job.job_state = vec!["RUNNING".into()];
                job.nodes = nodes.join(",");
                job.start_time = NoValue::of(self.changed_at);
            }
        }
        self.refresh_nodes();
    }

    /// Whether job `id` could start now (without starting it).
    pub(super) fn fits_now(&self, id: u32) -> bool {
        self.fit(id).is_some()
    }

    fn fit(&self, id: u32) -> Option<Vec<String>> {
        let demand = self.demands.get(&id)?;
        let used = self.used_cpus();
        let chosen: Vec<String> = self
            .nodes
            .values()
            .filter(|node| demand.allows(node))
            .filter(|node| node.cpus.saturating_sub(used.get(&node.name).copied().unwrap_or(0)) >= demand.cpus_per_node)
            .map(|node| node.name.clone())
            .take(demand.nodes)
            .collect();
        (chosen.len() == demand.nodes).then_some(chosen)
    }

    /// CPUs the running jobs hold, by node.
    fn used_cpus(&self) -> BTreeMap<String, u64> {
        let mut used = BTreeMap::new();
        for job in self.jobs.values().filter(|job| job.holds_nodes()) {
            let per_node = self.demands.get(&job.job_id).map_or(0, |demand| demand.cpus_per_node);
            for node in job.nodes.split(',') {
                *used.entry(node.to_owned()).or_default() += per_node;
            }
        }
        used
    }

    /// Each node's base state (IDLE, MIXED, ALLOCATED) and allocated CPUs from the running jobs; its
    /// flags (DRAIN, DYNAMIC_NORM...) stay.
    fn refresh_nodes(&mut self) {
        let used = self.used_cpus();
        for node in self.nodes.values_mut() {
            let alloc = used.get(&node.name).copied().unwrap_or(0);
            let base = match alloc {
                0 => "IDLE",
                alloc if alloc >= node.cpus => "ALLOCATED",
                _ => "MIXED",
            };
            if matches!(node.state.first().map(String::as_str), Some("IDLE" | "MIXED" | "ALLOCATED")) {
                node.state[0] = base.to_owned();
            }
            node.alloc_cpus = alloc;
        }
    }
}
