//! Where a pod is in its life, as the scheduler reads it.

use crate::scheduler::watched_pod::WatchedPod;

use super::timing::STOP_GRACE;

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

/// Whether a bound pod being deleted may still have containers on its Node (until its grace period
/// ended `STOP_GRACE` ago).
pub fn still_running_on_its_node(pod: &WatchedPod) -> bool {
    let Some(deleted) = pod.metadata.deletion_timestamp.as_ref() else { return false };
    if pod.spec.as_ref().and_then(|spec| spec.node_name.as_ref()).is_none() {
        return false;
    }
    // The deletion timestamp is when the grace period ends.
    let past_grace = k8s_openapi::jiff::Timestamp::now().duration_since(deleted.0);
    if past_grace.as_secs() > i64::try_from(STOP_GRACE.as_secs()).unwrap_or(i64::MAX) {
        return false;
    }
    let statuses = pod.status.as_ref().and_then(|status| status.container_statuses.as_deref()).unwrap_or_default();
    statuses.iter().any(|status| status.state.as_ref().is_none_or(|state| state.terminated.is_none()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deleted_pod(seconds_from_now: i64, container_state: serde_json::Value) -> WatchedPod {
        let at = k8s_openapi::jiff::Timestamp::now() + k8s_openapi::jiff::SignedDuration::from_secs(seconds_from_now);
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "deletionTimestamp": at.to_string()},
            "spec": {"nodeName": "n1", "containers": [{"name": "a"}]},
            "status": {"containerStatuses": [{"name": "a", "image": "i", "imageID": "", "ready": true,
                                               "restartCount": 0, "state": container_state}]}
        }))
        .unwrap()
    }

    #[test]
    fn a_deleted_pod_holds_its_node_until_its_containers_stop() {
        let running = serde_json::json!({"running": {}});
        assert!(still_running_on_its_node(&deleted_pod(5, running.clone())));
        let stopped = serde_json::json!({"terminated": {"exitCode": 0}});
        assert!(!still_running_on_its_node(&deleted_pod(5, stopped)));
        assert!(!still_running_on_its_node(&deleted_pod(-60, running)), "not past its grace period and 30 s");
    }
}
