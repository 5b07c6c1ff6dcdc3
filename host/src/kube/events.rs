//! Events, recorded best-effort: failing to record one is logged, never fatal.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder};

pub async fn publish(
    recorder: &Recorder,
    about: &ObjectReference,
    warning: bool,
    reason: &str,
    action: &str,
    note: String,
) {
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
