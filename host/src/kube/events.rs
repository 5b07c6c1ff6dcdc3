//! Events, recorded best-effort: failing to record one is logged, never fatal.
//!
//! kube-runtime's `Recorder` folds every event with the same object, reason and action into one
//! series that keeps the first note: "Drain kube-node-4" then "Drain kube-node-3" would show as
//! "Drain kube-node-4 (x2)". So each distinct note gets a recorder of its own: repeats of one note
//! still fold into a series, a different note is a new Event.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::Mutex;

/// How long a note's recorder is kept after its last use; kube-runtime forgets a series after
/// six minutes anyway.
const KEEP: Duration = Duration::from_secs(600);

#[derive(Clone)]
pub struct EventRecorder {
    client: Client,
    reporter: Reporter,
    by_note: Arc<Mutex<HashMap<String, (Recorder, Instant)>>>,
}

impl EventRecorder {
    /// `controller` names the reporting controller; the instance is the pod's name when in a cluster.
    pub fn new(client: Client, controller: &str) -> Self {
        let reporter = Reporter { controller: controller.into(), instance: std::env::var("POD_NAME").ok() };
        Self { client, reporter, by_note: Arc::default() }
    }

    pub async fn publish(&self, about: &ObjectReference, warning: bool, reason: &str, action: &str, note: String) {
        let recorder = self.recorder_for(&note).await;
        let event = Event {
            type_: if warning { EventType::Warning } else { EventType::Normal },
            reason: reason.into(),
            note: Some(note),
            action: action.into(),
            secondary: None,
        };
        if let Err(error) = recorder.publish(&event, about).await {
            let name = about.name.as_deref().unwrap_or_default();
            tracing::warn!(object = %name, %error, "could not record event {reason}");
        }
    }

    async fn recorder_for(&self, note: &str) -> Recorder {
        let now = Instant::now();
        let mut by_note = self.by_note.lock().await;
        by_note.retain(|_, (_, used)| now.duration_since(*used) < KEEP);
        let (recorder, used) = by_note
            .entry(note.to_owned())
            .or_insert_with(|| (Recorder::new(self.client.clone(), self.reporter.clone()), now));
        *used = now;
        recorder.clone()
    }
}
