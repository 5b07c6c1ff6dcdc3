//! Keeps the fake Nodes' Ready condition fresh, as a kubelet's heartbeat does.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};

pub const FAKE_NODE_LABEL: &str = "sunk.dev/fake-node=true";

pub async fn heartbeat(client: Client, every: Duration) {
    let nodes: Api<Node> = Api::all(client);
    loop {
        if let Err(error) = beat(&nodes).await {
            tracing::warn!(%error, "node heartbeat failed");
        }
        tokio::time::sleep(every).await;
    }
}

async fn beat(nodes: &Api<Node>) -> kube::Result<()> {
    let now = Timestamp::now().to_string();
    for node in nodes.list(&ListParams::default().labels(FAKE_NODE_LABEL)).await? {
        let patch = serde_json::json!({"status": {"conditions": [{
            "type": "Ready", "status": "True", "reason": "KubeletReady", "message": "sunk test agent is posting ready status",
            "lastHeartbeatTime": now,
        }]}});
        nodes.patch_status(&node.name_any(), &PatchParams::default(), &Patch::Strategic(patch)).await?;
    }
    Ok(())
}
