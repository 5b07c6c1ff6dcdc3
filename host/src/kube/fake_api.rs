//! A fake API server for the middle tier of tests: a [`Client`] over pods held in memory. It does
//! what the scheduler's writes need (the `PodScheduled` condition patched into a pod's status, a
//! binding, a delete, an eviction, Events) and records each write as one line (`bind ml/a
//! kube-node-1`, `delete ml/a`, `event ml/a SlurmJobCancelled`), so a test reads what the host did
//! the way an operator would. Any other call is answered 404 and recorded as `unexpected ...`.
//!
//! Unlike `mock_api` it expects no script: a test states the outcome, not the order of calls.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use http::{Method, Request, Response};
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use kube::client::Body;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

/// The pods, and every write the host made.
#[derive(Clone, Default)]
pub struct FakeApi {
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    pods: BTreeMap<(String, String), Pod>,
    writes: Vec<String>,
}

impl FakeApi {
    /// A client of this API server.
    pub fn client(&self) -> Client {
        let api = self.clone();
        let service = tower::service_fn(move |request: Request<Body>| {
            let api = api.clone();
            async move { Ok::<_, Infallible>(api.answer(request).await) }
        });
        Client::new(service, "default")
    }

    pub fn put_pod(&self, pod: Pod) {
        let key = (pod.namespace().unwrap_or_default(), pod.name_any());
        self.lock().pods.insert(key, pod);
    }

    /// The pod is gone (its kubelet is done with it, say), without a write by the host.
    pub fn remove_pod(&self, namespace: &str, name: &str) {
        self.lock().pods.remove(&(namespace.to_owned(), name.to_owned()));
    }

    pub fn pod(&self, namespace: &str, name: &str) -> Option<Pod> {
        self.lock().pods.get(&(namespace.to_owned(), name.to_owned())).cloned()
    }

    pub fn pods(&self) -> Vec<Pod> {
        self.lock().pods.values().cloned().collect()
    }

    /// Every write so far, as one line each, in order.
    pub fn writes(&self) -> Vec<String> {
        self.lock().writes.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("fake API server")
    }

    async fn answer(&self, request: Request<Body>) -> Response<Body> {
        let method = request.method().clone();
        let path = request.uri().path().to_owned();
        let body = request.into_body().collect_bytes().await.expect("a request body");
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        match segments.as_slice() {
            ["api", "v1", "namespaces", namespace, "pods", name, rest @ ..] => {
                self.pod_call(&method, namespace, name, rest.first().copied(), &body)
            }
            ["apis", "events.k8s.io", "v1", "namespaces", namespace, "events", ..] => {
                let about = body["regarding"]["name"].as_str().unwrap_or_default();
                let reason = body["reason"].as_str().unwrap_or_default();
                self.lock().writes.push(format!("event {namespace}/{about} {reason}"));
                reply(201, body)
            }
            _ => self.unexpected(&method, &path),
        }
    }

    fn pod_call(
        &self,
        method: &Method,
        namespace: &str,
        name: &str,
        sub: Option<&str>,
        body: &Value,
    ) -> Response<Body> {
        let key = (namespace.to_owned(), name.to_owned());
        let mut guard = self.lock();
        let State { pods, writes } = &mut *guard;
        let Some(pod) = pods.get_mut(&key) else {
            return status(404, "NotFound", &format!("pods \"{name}\" not found"));
        };
        match (method.as_str(), sub) {
            ("GET", None) => reply(200, json!(pod)),
            ("PATCH", Some("status")) => {
                let conditions: Vec<PodCondition> =
                    serde_json::from_value(body["status"]["conditions"].clone()).unwrap_or_default();
                let status = pod.status.get_or_insert_with(PodStatus::default);
                let held = status.conditions.get_or_insert_with(Vec::new);
                for condition in conditions {
                    let line = format!(
                        "condition {namespace}/{name} {} {}",
                        condition.status,
                        condition.reason.as_deref().unwrap_or_default()
                    );
                    held.retain(|c| c.type_ != condition.type_);
                    held.push(condition);
                    writes.push(line);
                }
                reply(200, json!(pod))
            }
            ("POST", Some("binding")) => {
                let spec = pod.spec.get_or_insert_with(Default::default);
                if spec.node_name.is_some() {
                    return status(409, "Conflict", "pod is already assigned to a node");
                }
                let node = body["target"]["name"].as_str().unwrap_or_default().to_owned();
                spec.node_name = Some(node.clone());
                writes.push(format!("bind {namespace}/{name} {node}"));
                status(201, "", "")
            }
            ("DELETE", None) | ("POST", Some("eviction")) => {
                let verb = if method == Method::DELETE { "delete" } else { "evict" };
                let pod = pods.remove(&key).expect("looked up");
                writes.push(format!("{verb} {namespace}/{name}"));
                reply(200, json!(pod))
            }
            _ => {
                drop(guard);
                self.unexpected(method, &format!("pods/{name}/{}", sub.unwrap_or_default()))
            }
        }
    }

    fn unexpected(&self, method: &Method, path: &str) -> Response<Body> {
        self.lock().writes.push(format!("unexpected {method} {path}"));
        status(404, "NotFound", "not served by the fake API server")
    }
}

fn reply(code: u16, body: Value) -> Response<Body> {
    let bytes = serde_json::to_vec(&body).expect("JSON");
    Response::builder().status(code).body(Body::from(bytes)).expect("a response")
}

fn status(code: u16, reason: &str, message: &str) -> Response<Body> {
    let outcome = if code < 400 { "Success" } else { "Failure" };
    let body = json!({"kind": "Status", "apiVersion": "v1", "status": outcome, "reason": reason, "message": message, "code": code});
    reply(code, body)
}
