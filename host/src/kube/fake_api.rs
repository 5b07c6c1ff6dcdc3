//! A fake API server for the middle tier of tests: a [`Client`] over objects held in memory, by
//! kind and name. It serves what the controllers' writes need (creation, merge and strategic patches
//! of any object and its status, a binding, a delete, an eviction, Events) and records each write as
//! one line (`create pods/ml/a`, `bind pods/ml/a kube-node-1`, `delete pods/ml/a`, `patch
//! nodes/kube-node-1/status`, `event ml/a SlurmJobCancelled`), so a test reads what the host did the
//! way an operator would: from the objects, or from that log. Any other call is answered 404 and logged as `unexpected ...`.
//!
//! Unlike `mock_api` it expects no script: a test states the outcome, not the order of calls. Its
//! strategic merge knows one list, `conditions`, merged by `type` (with `$patch: delete`); every
//! other list is replaced, as a JSON merge patch does.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use http::{Request, Response};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::client::Body;
use kube::{Client, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The objects, and every write the host made.
#[derive(Clone, Default)]
pub struct FakeApi {
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    /// By kind and name: `pods/ml/a`, `nodes/kube-node-1`.
    objects: BTreeMap<String, Value>,
    writes: Vec<String>,
    /// The resource version the last change was given.
    version: u64,
}

impl State {
    /// A new resource version for an object that changed, as the API server gives one on every write.
    fn changed(version: &mut u64, object: &mut Value) {
        *version += 1;
        object["metadata"]["resourceVersion"] = json!(version.to_string());
    }
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
        let key = format!("pods/{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
        self.put(key, json!(pod));
    }

    pub fn put_node(&self, node: Node) {
        self.put(format!("nodes/{}", node.name_any()), json!(node));
    }

    /// The pod is gone (its kubelet is done with it, say), without a write by the host.
    pub fn remove_pod(&self, namespace: &str, name: &str) {
        self.lock().objects.remove(&format!("pods/{namespace}/{name}"));
    }

    pub fn pod(&self, namespace: &str, name: &str) -> Option<Pod> {
        self.get(&format!("pods/{namespace}/{name}"))
    }

    pub fn node(&self, name: &str) -> Option<Node> {
        self.get(&format!("nodes/{name}"))
    }

    pub fn pods(&self) -> Vec<Pod> {
        self.all("pods/")
    }

    pub fn nodes(&self) -> Vec<Node> {
        self.all("nodes/")
    }

    /// Every write so far, as one line each, in order.
    pub fn writes(&self) -> Vec<String> {
        self.lock().writes.clone()
    }

    fn put(&self, key: String, mut object: Value) {
        let mut state = self.lock();
        State::changed(&mut state.version, &mut object);
        state.objects.insert(key, object);
    }

    fn get<T: DeserializeOwned>(&self, key: &str) -> Option<T> {
        let object = self.lock().objects.get(key).cloned()?;
        Some(serde_json::from_value(object).expect("a stored object"))
    }

    fn all<T: DeserializeOwned>(&self, prefix: &str) -> Vec<T> {
        let state = self.lock();
        let objects = state.objects.iter().filter(|(key, _)| key.starts_with(prefix));
        objects.map(|(_, object)| serde_json::from_value(object.clone()).expect("a stored object")).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("fake API server")
    }

    async fn answer(&self, request: Request<Body>) -> Response<Body> {
        let method = request.method().as_str().to_owned();
        let path = request.uri().path().to_owned();
        let strategic = request
            .headers()
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|kind| kind.as_bytes().starts_with(b"application/strategic-merge-patch"));
        let body = request.into_body().collect_bytes().await.expect("a request body");
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let (key, sub) = match segments.as_slice() {
            ["apis", "events.k8s.io", "v1", "namespaces", namespace, "events", ..] => {
                let about = body["regarding"]["name"].as_str().unwrap_or_default();
                let reason = body["reason"].as_str().unwrap_or_default();
                self.lock().writes.push(format!("event {namespace}/{about} {reason}"));
                return reply(201, body);
            }
            // A collection: only creation is served.
            ["api", _, "namespaces", namespace, plural] | ["apis", _, _, "namespaces", namespace, plural]
                if method == "POST" =>
            {
                return self.create(&format!("{plural}/{namespace}"), body);
            }
            ["api", _, "namespaces", namespace, plural, name, rest @ ..]
            | ["apis", _, _, "namespaces", namespace, plural, name, rest @ ..] => {
                (format!("{plural}/{namespace}/{name}"), rest.first().copied())
            }
            ["api", _, plural, name, rest @ ..] | ["apis", _, _, plural, name, rest @ ..] => {
                (format!("{plural}/{name}"), rest.first().copied())
            }
            _ => return self.unexpected(&method, &path),
        };
        let mut state = self.lock();
        let State { objects, writes, version } = &mut *state;
        let Some(object) = objects.get_mut(&key) else {
            return status(404, "NotFound", &format!("{key} not found"));
        };
        match (method.as_str(), sub) {
            ("GET", None) => reply(200, object.clone()),
            ("PATCH", sub @ (None | Some("status"))) => {
                merge(object, &body, strategic);
                State::changed(version, object);
                writes.push(format!("patch {key}{}", sub.map(|s| format!("/{s}")).unwrap_or_default()));
                reply(200, object.clone())
            }
            ("POST", Some("binding")) => {
                if !object["spec"]["nodeName"].is_null() {
                    return status(409, "Conflict", "pod is already assigned to a node");
                }
                let node = body["target"]["name"].clone();
                writes.push(format!("bind {key} {}", node.as_str().unwrap_or_default()));
                object["spec"]["nodeName"] = node;
                State::changed(version, object);
                status(201, "", "")
            }
            ("DELETE", None) | ("POST", Some("eviction")) => {
                let verb = if method == "DELETE" { "delete" } else { "evict" };
                writes.push(format!("{verb} {key}"));
                let gone = objects.remove(&key).expect("looked up");
                reply(200, gone)
            }
            _ => {
                drop(state);
                self.unexpected(&method, &path)
            }
        }
    }

    /// Creates an object in `collection` (`pods/ml`), with a uid and creation time, as the API server
    /// would; a name already taken is a conflict.
    fn create(&self, collection: &str, mut object: Value) -> Response<Body> {
        let name = object["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        let key = format!("{collection}/{name}");
        let mut state = self.lock();
        if state.objects.contains_key(&key) {
            return status(409, "AlreadyExists", &format!("{key} already exists"));
        }
        object["metadata"]["uid"] = json!(format!("uid-{name}"));
        object["metadata"]["creationTimestamp"] = json!(k8s_openapi::jiff::Timestamp::now().to_string());
        State::changed(&mut state.version, &mut object);
        state.writes.push(format!("create {key}"));
        state.objects.insert(key, object.clone());
        reply(201, object)
    }

    /// Any object, by kind and name (`nodesets/ml/gpus`), typed.
    pub fn object<T: DeserializeOwned>(&self, key: &str) -> Option<T> {
        self.get(key)
    }

    /// Puts any object at `key` (`nodesets/ml/gpus`), as its owner would create or change it.
    pub fn put_object(&self, key: &str, object: Value) {
        self.put(key.to_owned(), object);
    }

    fn unexpected(&self, method: &str, path: &str) -> Response<Body> {
        self.lock().writes.push(format!("unexpected {method} {path}"));
        status(404, "NotFound", "not served by the fake API server")
    }
}

/// Applies a JSON merge patch, or (`strategic`) a strategic one as far as this fake knows it.
fn merge(target: &mut Value, patch: &Value, strategic: bool) {
    let (Some(target_fields), Some(patch_fields)) = (target.as_object_mut(), patch.as_object()) else {
        *target = patch.clone();
        return;
    };
    for (field, change) in patch_fields {
        match (field.as_str(), change) {
            (_, Value::Null) => _ = target_fields.remove(field),
            ("conditions", Value::Array(changes)) if strategic => {
                let held = target_fields.entry(field.clone()).or_insert_with(|| json!([]));
                let list = held.as_array_mut().expect("conditions are a list");
                for change in changes {
                    list.retain(|condition| condition["type"] != change["type"]);
                    if change["$patch"] != "delete" {
                        list.push(change.clone());
                    }
                }
            }
            (_, Value::Object(_)) => {
                merge(target_fields.entry(field.clone()).or_insert_with(|| json!({})), change, strategic)
            }
            _ => _ = target_fields.insert(field.clone(), change.clone()),
        }
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
