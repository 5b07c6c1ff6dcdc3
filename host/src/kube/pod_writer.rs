//! The writes a scheduler makes to pods it owns.

use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, EvictParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Client, Resource, ResourceExt};

use super::{EventRecorder, gone_is_done, gone_or_replaced_is_done, is_gone_or_replaced};
use serde_json::json;

/// Binds, annotates and deletes pods, and records events about them. A pod is named by its
/// metadata (namespace, name, uid): whatever type a controller keeps its pods in will do.
#[derive(Clone)]
pub struct PodWriter {
    client: Client,
    /// Evictions go through a client that does not retry 429 (a disruption budget's refusal).
    evictions: Client,
    recorder: EventRecorder,
}

impl PodWriter {
    pub fn new(client: Client, controller: &str) -> Self {
        Self { recorder: EventRecorder::new(client.clone(), controller), evictions: client.clone(), client }
    }

    /// Evictions through `client`, which should not retry 429 (see `connect_without_retries`).
    pub fn evicting_with(self, client: Client) -> Self {
        Self { evictions: client, ..self }
    }

    fn api(&self, pod: &impl Resource) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default())
    }

    /// Binds the pod to a node (what kube-scheduler does through `pods/binding`). Returns false when
    /// the pod was bound already (a pass that saw it before its binding landed): nothing to do.
    pub async fn bind(&self, pod: &impl Resource, node: &str) -> kube::Result<bool> {
        let binding = Binding {
            metadata: ObjectMeta { name: Some(pod.name_any()), uid: pod.uid(), ..Default::default() },
            target: ObjectReference { kind: Some("Node".into()), name: Some(node.into()), ..Default::default() },
        };
        // The API server answers a binding with a Status, not a Binding.
        let created = self
            .api(pod)
            .create_subresource::<_, serde_json::Value>("binding", &pod.name_any(), &PostParams::default(), &binding)
            .await;
        match created {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Sets `PodScheduled` (status, reason, message) unless the pod's `current` one already says
    /// exactly that. The message is written on one line (see [`super::one_line`]). A pod gone
    /// meanwhile is no error.
    pub async fn set_scheduled_condition(
        &self,
        pod: &impl Resource,
        current: Option<&PodCondition>,
        scheduled: bool,
        reason: &str,
        message: &str,
    ) -> kube::Result<()> {
        let status = if scheduled { "True" } else { "False" };
        let message = super::one_line(message);
        if let Some(current) = current
            && current.status == status
            && current.reason.as_deref() == Some(reason)
            && current.message.as_deref() == Some(message.as_str())
        {
            return Ok(());
        }
        let transitioned = current.is_none_or(|current| current.status != status);
        let last_transition_time = if transitioned {
            Some(Time(Timestamp::now()))
        } else {
            current.and_then(|c| c.last_transition_time.clone())
        };
        let condition = PodCondition {
            type_: "PodScheduled".into(),
            status: status.into(),
            reason: Some(reason.into()),
            message: Some(message),
            last_transition_time,
            ..Default::default()
        };
        let patch = json!({ "status": { "conditions": [condition] } });
        // Deleted since the pass began: nothing is waiting any more.
        gone_is_done(
            self.api(pod).patch_status(&pod.name_any(), &PatchParams::default(), &Patch::Strategic(patch)).await,
        )
    }

    /// Deletes the pod with its own grace period; a pod already gone (or replaced) is left alone.
    pub async fn delete(&self, pod: &impl Resource) -> kube::Result<()> {
        let params = DeleteParams {
            preconditions: Some(Preconditions { uid: pod.uid(), resource_version: None }),
            ..Default::default()
        };
        gone_or_replaced_is_done(self.api(pod).delete(&pod.name_any(), &params).await)
    }

    /// Evicts the pod with `grace_seconds` (the Eviction API, which honours PodDisruptionBudgets).
    /// Returns the budget's refusal, if one refused; a pod already gone counts as evicted.
    pub async fn evict(&self, pod: &impl Resource, grace_seconds: u32) -> kube::Result<Option<String>> {
        let params = EvictParams {
            delete_options: Some(DeleteParams {
                grace_period_seconds: Some(grace_seconds),
                preconditions: Some(Preconditions { uid: pod.uid(), resource_version: None }),
                ..Default::default()
            }),
            post_options: PostParams::default(),
        };
        let api: Api<Pod> = Api::namespaced(self.evictions.clone(), &pod.namespace().unwrap_or_default());
        match api.evict(&pod.name_any(), &params).await {
            Ok(_) => Ok(None),
            Err(error) if is_gone_or_replaced(&error) => Ok(None),
            // TooManyRequests: evicting it now would break a PodDisruptionBudget.
            Err(kube::Error::Api(status)) if status.code == 429 => Ok(Some(status.message)),
            Err(error) => Err(error),
        }
    }

    /// Records an event on the pod. Failing to record one is logged, never fatal.
    pub async fn event(
        &self,
        pod: &impl Resource<DynamicType = ()>,
        warning: bool,
        reason: &str,
        action: &str,
        note: String,
    ) {
        self.recorder.publish(&pod.object_ref(&()), warning, reason, action, note).await;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::kube::mock_api::{Expect, serve};

    fn pod() -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "ml", "uid": "u-1"}})).unwrap()
    }

    fn scheduled_condition(conditions: &serde_json::Value) -> Option<PodCondition> {
        serde_json::from_value(conditions[0].clone()).ok()
    }

    fn status(code: u16, reason: &str) -> serde_json::Value {
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason, "message": reason})
    }

    const POD: &str = "/api/v1/namespaces/ml/pods/web";

    #[tokio::test]
    async fn a_binding_names_the_node_and_a_second_one_is_no_error() {
        let bound = json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201});
        let (client, api) = serve(vec![
            Expect::call("POST", format!("{POD}/binding?"), 201, bound),
            Expect::call("POST", format!("{POD}/binding?"), 409, status(409, "Conflict")),
        ]);
        let writer = PodWriter::new(client, "sunk");
        assert!(writer.bind(&pod(), "kube-node-1").await.unwrap(), "bound");
        assert!(!writer.bind(&pod(), "kube-node-1").await.unwrap(), "bound already: nothing to do");
        drop(writer); // a request short of the script fails the test instead of waiting for ever
        let sent = api.await.unwrap();
        assert_eq!(sent[0]["target"], json!({"kind": "Node", "name": "kube-node-1"}));
        assert_eq!(sent[0]["metadata"]["uid"], "u-1", "the binding is for this pod, not one recreated by name");
    }

    #[tokio::test]
    async fn a_condition_that_already_says_it_is_not_written_again() {
        let waiting = json!([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "m"}]);
        let (client, api) = serve(vec![Expect::call("PATCH", format!("{POD}/status?"), 200, json!({}))]);
        let writer = PodWriter::new(client, "sunk");
        let current = scheduled_condition(&waiting);
        writer.set_scheduled_condition(&pod(), current.as_ref(), false, "Unschedulable", "m").await.unwrap();
        writer.set_scheduled_condition(&pod(), current.as_ref(), false, "Unschedulable", "changed").await.unwrap();
        drop(writer);
        let sent = api.await.unwrap();
        let condition = &sent[0]["status"]["conditions"][0];
        assert_eq!(
            (condition["reason"].as_str(), condition["message"].as_str()),
            (Some("Unschedulable"), Some("changed"))
        );
    }

    #[tokio::test]
    async fn a_condition_message_is_written_on_one_line_and_not_again_once_it_says_so() {
        let (client, api) = serve(vec![Expect::call("PATCH", format!("{POD}/status?"), 200, json!({}))]);
        let writer = PodWriter::new(client, "sunk");
        let message = "Slurm refused the job:\n  Invalid account\n";
        writer.set_scheduled_condition(&pod(), None, false, "SlurmRejected", message).await.unwrap();
        let written = json!([{"type": "PodScheduled", "status": "False", "reason": "SlurmRejected",
                              "message": "Slurm refused the job: Invalid account"}]);
        let current = scheduled_condition(&written);
        writer.set_scheduled_condition(&pod(), current.as_ref(), false, "SlurmRejected", message).await.unwrap();
        drop(writer);
        let sent = api.await.unwrap();
        assert_eq!(sent[0]["status"]["conditions"][0]["message"], "Slurm refused the job: Invalid account");
    }

    #[tokio::test]
    async fn a_condition_for_a_pod_deleted_meanwhile_is_no_error() {
        let (client, api) = serve(vec![Expect::call("PATCH", format!("{POD}/status?"), 404, status(404, "NotFound"))]);
        let writer = PodWriter::new(client, "sunk");
        writer.set_scheduled_condition(&pod(), None, false, "Unschedulable", "m").await.unwrap();
        drop(writer);
        api.await.unwrap();
    }

    #[tokio::test]
    async fn deleting_a_pod_names_its_uid_and_a_pod_gone_is_no_error() {
        let (client, api) = serve(vec![Expect::call("DELETE", format!("{POD}?"), 404, status(404, "NotFound"))]);
        PodWriter::new(client, "sunk").delete(&pod()).await.unwrap();
        let sent = api.await.unwrap();
        assert_eq!(sent[0]["preconditions"]["uid"], "u-1", "never a newer pod of the same name");
    }
}
