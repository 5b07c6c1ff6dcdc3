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

/// Recorders kept at most. Most notes are said once (10,000 pods arriving each get "submitted as
/// Slurm job 12_7"); a recorder, with its cache of the series it made, each for ten minutes, would
/// be 10,000 of them, and a scan of all on every Event. The notes that repeat are the recent ones.
const MOST_NOTES: usize = 1024;

#[derive(Clone)]
pub struct EventRecorder {
    client: Client,
    reporter: Reporter,
    by_note: Arc<Mutex<ByNote<Recorder>>>,
}

impl EventRecorder {
    /// `controller` names the reporting controller; the instance is the pod's name when in a cluster.
    pub fn new(client: Client, controller: &str) -> Self {
        let reporter = Reporter { controller: controller.into(), instance: std::env::var("POD_NAME").ok() };
        Self { client, reporter, by_note: Arc::new(Mutex::new(ByNote::default())) }
    }

    /// Records an Event; its note is made one line of at most [`super::MESSAGE_LIMIT`] characters.
    pub async fn publish(&self, about: &ObjectReference, warning: bool, reason: &str, action: &str, note: String) {
        let note = super::one_line(&note);
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
        let new = || Recorder::new(self.client.clone(), self.reporter.clone());
        self.by_note.lock().await.get_or_insert(note, Instant::now(), new)
    }
}

/// What each recent note was given (its recorder), the most recently used [`MOST_NOTES`] of them,
/// none unused for [`KEEP`].
struct ByNote<V> {
    entries: HashMap<String, (V, Instant)>,
}

impl<V> Default for ByNote<V> {
    fn default() -> Self {
        Self { entries: HashMap::new() }
    }
}

impl<V: Clone> ByNote<V> {
    fn get_or_insert(&mut self, note: &str, now: Instant, new: impl FnOnce() -> V) -> V {
        if let Some((value, used)) = self.entries.get_mut(note) {
            *used = now;
            return value.clone();
        }
        self.entries.retain(|_, (_, used)| now.duration_since(*used) < KEEP);
        if self.entries.len() >= MOST_NOTES {
            let oldest = self.entries.iter().min_by_key(|(_, (_, used))| *used).map(|(note, _)| note.clone());
            if let Some(oldest) = oldest {
                self.entries.remove(&oldest);
            }
        }
        let value = new();
        self.entries.insert(note.to_owned(), (value.clone(), now));
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_note_keeps_its_recorder_and_the_least_recent_go_first() {
        let mut by_note = ByNote::default();
        let start = Instant::now();
        let mut made = 0;
        for n in 0..MOST_NOTES {
            by_note.get_or_insert(&format!("note {n}"), start + Duration::from_millis(n as u64), || {
                made += 1;
                made
            });
        }
        let later = start + Duration::from_secs(5);
        assert_eq!(by_note.get_or_insert("note 0", later, || 0), 1, "the same recorder: its series goes on");
        by_note.get_or_insert("one more", later, || 0);
        assert_eq!(by_note.entries.len(), MOST_NOTES);
        assert!(!by_note.entries.contains_key("note 1"), "the least recently used made room");
        assert!(by_note.entries.contains_key("note 0"));
        by_note.get_or_insert("much later", later + KEEP, || 0);
        assert_eq!(by_note.entries.len(), 1, "none used for {KEEP:?} is kept");
    }
}
