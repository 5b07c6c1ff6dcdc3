//! Where a pod is in its life, as the scheduler reads it.

use crate::scheduler::watched_pod::WatchedPod;

/// Why the pod no longer needs its job, if it does not: it is being deleted, or it has finished
/// (including a kubelet refusing to run it, e.g. `OutOfmemory`, which leaves it Failed).
pub fn leaving(pod: &WatchedPod) -> Option<String> {
    if pod.metadata.deletion_timestamp.is_some() {
        return Some("its pod is being deleted".into());
    }
    let status = pod.status.as_ref()?;
    match status.phase.as_deref()? {
        "Succeeded" => Some("its pod has succeeded".into()),
        "Failed" => Some(match (status.reason.as_deref(), status.message.as_deref()) {
            (Some(reason), Some(message)) => format!("its pod failed ({reason}: {message})"),
            (Some(reason), None) => format!("its pod failed ({reason})"),
            _ => "its pod failed".into(),
        }),
        _ => None,
    }
}
