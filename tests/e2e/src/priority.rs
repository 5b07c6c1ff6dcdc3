//! A cluster-scoped PriorityClass for one test or run, deleted when dropped.

use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{Api, PostParams};

use crate::{Cluster, kubectl};

/// A PriorityClass named after the test's namespace and `suffix`.
pub struct Priority {
    pub name: String,
}

impl Priority {
    pub async fn create(cluster: &Cluster, suffix: &str, value: i32) -> anyhow::Result<Self> {
        let api: Api<PriorityClass> = Api::all(cluster.kube.clone());
        let name = format!("{}-{suffix}", cluster.namespace);
        let class: PriorityClass = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name}, "value": value,
        }))?;
        api.create(&PostParams::default(), &class).await?;
        Ok(Self { name })
    }
}

impl Drop for Priority {
    fn drop(&mut self) {
        // Drop cannot await (and the test's client needs its runtime): kubectl does it.
        let _ = kubectl(&["delete", "priorityclass", &self.name, "--wait=false"]).output();
    }
}
