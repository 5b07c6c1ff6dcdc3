//! How far each Slurm Node's pool is from held once.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::ledger::{Finding, Resource};

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabels {
    /// The Kubernetes Node.
    node: String,
    /// The resource and its unit: `cpu_millicores`, `memory_bytes`, `gpus`.
    resource: &'static str,
}

/// Clones share the same series.
#[derive(Clone, Default)]
pub struct PoolMetrics {
    overcommitted: Family<PoolLabels, Gauge>,
}

impl PoolMetrics {
    /// Adds the series to `registry` (under the `sunk_pool` prefix).
    pub fn register(&self, registry: &mut Registry) {
        let registry = registry.sub_registry_with_prefix("sunk_pool");
        registry.register(
            "overcommitted",
            "How much more of a resource Slurm offers jobs on a Node than the pods outside Slurm leave it \
             (0: held once), in the unit the resource label names",
            self.overcommitted.clone(),
        );
    }

    /// The Node's series, every resource of it (0 where held once).
    pub fn set(&self, node: &str, finding: &Finding) {
        let over: &[(Resource, u64)] = match finding {
            Finding::HeldOnce => &[],
            Finding::Overcommitted { over, .. } => over,
        };
        for resource in Resource::ALL {
            let amount = over.iter().find(|(of, _)| *of == resource).map_or(0, |(_, amount)| *amount);
            let labels = PoolLabels { node: node.to_owned(), resource: resource.label() };
            self.overcommitted.get_or_create(&labels).set(i64::try_from(amount).unwrap_or(i64::MAX));
        }
    }

    /// Drops the series of a Node that no longer runs a Slurm node.
    pub fn forget(&self, node: &str) {
        for resource in Resource::ALL {
            self.overcommitted.remove(&PoolLabels { node: node.to_owned(), resource: resource.label() });
        }
    }
}
