//! The fake Nodes: a reflector of the Nodes labelled `sunk.dev/fake-node=true`, and their heartbeat.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};

use crate::status::node_ready_patch;

/// The label that makes a Node one of the agent's.
pub const FAKE_NODE_SELECTOR: &str = "sunk.dev/fake-node=true";

/// A store of the fake Nodes, and the future that keeps it filled (it runs until dropped and
/// retries with backoff on errors).
pub fn watch(client: Client) -> (Store<Node>, impl Future<Output = ()> + Send + 'static) {
    let (reader, writer) = reflector::store();
    let stream = watcher(Api::<Node>::all(client), watcher::Config::default().labels(FAKE_NODE_SELECTOR))
        .default_backoff()
        .reflect(writer)
        .for_each(|event| async move {
            if let Err(error) = event {
                tracing::warn!(%error, "watching the fake Nodes failed; retrying");
            }
        });
    (reader, stream)
}

/// Keeps every fake Node Ready: patches the status of each, every `every`, as a kubelet does.
pub async fn heartbeat(client: Client, nodes: Store<Node>, every: Duration) {
    let api: Api<Node> = Api::all(client);
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        for node in nodes.state() {
            let patch = node_ready_patch(&node, Timestamp::now());
            match api.patch_status(&node.name_any(), &PatchParams::default(), &Patch::Strategic(patch)).await {
                Ok(_) => tracing::debug!(node = node.name_any(), "heartbeat"),
                Err(error) => tracing::warn!(node = node.name_any(), %error, "node heartbeat failed"),
            }
        }
    }
}
