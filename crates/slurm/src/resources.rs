//! CPUs, memory and GPUs on one node: what a job holds or asks for there, and what a node has free,
//! read from the strings slurmrestd lists them in.

use super::{Job, Node};

/// CPUs, MiB of memory and GPUs on one node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Resources {
    pub cpus: u64,
    pub memory_mib: u64,
    pub gpus: u64,
}

impl Resources {
    pub fn plus(self, other: Resources) -> Resources {
        Resources {
            cpus: self.cpus + other.cpus,
            memory_mib: self.memory_mib + other.memory_mib,
            gpus: self.gpus + other.gpus,
        }
    }

    pub fn covers(self, need: Resources) -> bool {
        self.cpus >= need.cpus && self.memory_mib >= need.memory_mib && self.gpus >= need.gpus
    }
}

impl Job {
    /// What the job holds on each of its nodes (its allocation divided evenly: Slurm lists totals).
    pub fn held_per_node(&self) -> Resources {
        let mut total = Resources::default();
        let mut nodes = 1;
        for (key, value) in self.tres_alloc_str.split(',').filter_map(|pair| pair.split_once('=')) {
            match key {
                "cpu" => total.cpus = value.parse().unwrap_or(0),
                "mem" => total.memory_mib = mebibytes(value).unwrap_or(0),
                "node" => nodes = value.parse().unwrap_or(1).max(1),
                "gres/gpu" => total.gpus = value.parse().unwrap_or(0),
                _ => {}
            }
        }
        Resources { cpus: total.cpus / nodes, memory_mib: total.memory_mib / nodes, gpus: total.gpus / nodes }
    }

    /// What a pending job asks for on each node it needs.
    pub fn asked_per_node(&self) -> Resources {
        let nodes = self.node_count.get().unwrap_or(1).max(1);
        let gpus = self
            .tres_per_node
            .split(',')
            .find_map(|tres| tres.strip_prefix("gres/gpu"))
            .and_then(|rest| rest.rsplit([':', '=']).next())
            .and_then(|count| count.parse().ok())
            .unwrap_or(0);
        Resources {
            cpus: self.cpus.get().unwrap_or(1) / nodes,
            memory_mib: self.memory_per_node.get().unwrap_or(0),
            gpus,
        }
    }

    /// The nodes it needs (a gang's job needs several).
    pub fn nodes_needed(&self) -> u64 {
        self.node_count.get().unwrap_or(1).max(1)
    }
}

impl Node {
    /// What no job holds on the node now.
    pub fn free(&self) -> Resources {
        let (total, held) = (self.total(), self.held());
        Resources {
            cpus: total.cpus.saturating_sub(held.cpus),
            memory_mib: total.memory_mib.saturating_sub(held.memory_mib),
            gpus: total.gpus.saturating_sub(held.gpus),
        }
    }

    /// What the node offers jobs: its CPUs, memory and GPUs as it registered them.
    pub fn total(&self) -> Resources {
        Resources { cpus: self.cpus, memory_mib: self.real_memory, gpus: gpu_count(&self.gres) }
    }

    /// What jobs hold on the node now.
    pub fn held(&self) -> Resources {
        Resources { cpus: self.alloc_cpus, memory_mib: self.alloc_memory, gpus: gpu_count(&self.gres_used) }
    }
}

/// `256M`, `2G`, `1T`, `512K` or plain MiB, as MiB.
fn mebibytes(text: &str) -> Option<u64> {
    let (number, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len()));
    let number: u64 = number.parse().ok()?;
    Some(match unit {
        "" | "M" => number,
        "K" => number / 1024,
        "G" => number * 1024,
        "T" => number * 1024 * 1024,
        _ => return None,
    })
}

/// The GPUs in a node's GRES list: `gpu:h100:2(S:0-1)`, `gpu:2`, `gpu:a100:1(IDX:0,2),shard:8`.
fn gpu_count(gres: &str) -> u64 {
    top_level_items(gres)
        .filter_map(|item| {
            let item = item.split('(').next().unwrap_or_default();
            let mut parts = item.split(':');
            if parts.next() != Some("gpu") {
                return None;
            }
            parts.next_back()?.parse::<u64>().ok()
        })
        .sum()
}

/// Comma-separated items, leaving commas inside parentheses alone.
fn top_level_items(list: &str) -> impl Iterator<Item = &str> {
    let mut depth = 0usize;
    list.split(move |c: char| {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        c == ',' && depth == 0
    })
    .filter(|item| !item.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NoValue;

    #[test]
    fn a_jobs_allocation_is_split_over_its_nodes() {
        let job = Job {
            tres_alloc_str: "cpu=4,mem=2G,node=2,billing=4,gres/gpu=2,gres/gpu:h100=2".into(),
            ..Default::default()
        };
        assert_eq!(job.held_per_node(), Resources { cpus: 2, memory_mib: 1024, gpus: 1 });
        assert_eq!(Job::default().held_per_node(), Resources::default());
    }

    #[test]
    fn a_pending_job_asks_per_node() {
        let job = Job {
            cpus: NoValue::of(4),
            node_count: NoValue::of(2),
            memory_per_node: NoValue::of(512),
            tres_per_node: "gres/gpu:h100:2".into(),
            ..Default::default()
        };
        assert_eq!(job.asked_per_node(), Resources { cpus: 2, memory_mib: 512, gpus: 2 });
        let plain = Job { tres_per_node: "gres/gpu=1".into(), ..Default::default() };
        assert_eq!(plain.asked_per_node().gpus, 1);
        assert_eq!(plain.nodes_needed(), 1);
    }

    #[test]
    fn a_nodes_free_resources_subtract_what_jobs_hold() {
        let node = Node {
            cpus: 8,
            alloc_cpus: 6,
            real_memory: 8192,
            alloc_memory: 1024,
            gres: "gpu:h100:2(S:0-1),shard:8".into(),
            gres_used: "gpu:h100:1(IDX:0),shard:0".into(),
            ..Default::default()
        };
        assert_eq!(node.free(), Resources { cpus: 2, memory_mib: 7168, gpus: 1 });
        assert_eq!(gpu_count("gpu:a100:1(IDX:0,2),gpu:h100:2"), 3);
        assert_eq!(gpu_count("(null)"), 0);
        assert_eq!(mebibytes("512K"), Some(0));
        assert_eq!(mebibytes("3x"), None);
    }
}
