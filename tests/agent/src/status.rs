//! The status documents the agent writes, as a kubelet would: a Node's Ready heartbeat and the
//! status of a pod whose containers run. Pure functions of the object and the clock.

use k8s_openapi::api::core::v1::{ContainerStatus, Node, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

/// The conditions a kubelet reports True for a pod whose containers all run and are ready.
const POD_CONDITIONS: [&str; 4] = ["PodScheduled", "Initialized", "ContainersReady", "Ready"];

/// What the agent knows of a process it runs for a container (the slurmd of a slurmd pod).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// The container's restartCount: the count the pod reported when the agent took it over,
    /// plus one for every restart by this agent.
    pub restarts: i32,
    /// When the current process started.
    pub started_at: Timestamp,
    /// How the previous process ended, once there was one.
    pub last_exit: Option<Exit>,
}

/// How a container's process ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exit {
    /// The exit code; a process killed by a signal reports 128 + the signal, as container runtimes do.
    pub code: i32,
    pub signal: Option<i32>,
    pub started_at: Timestamp,
    pub finished_at: Timestamp,
}

/// Time as the API server writes it: RFC 3339 in UTC, whole seconds.
pub fn time(at: Timestamp) -> Value {
    serde_json::to_value(Time(at)).unwrap_or_else(|_| Value::String(at.to_string()))
}

/// Strategic-merge patch for a Node's status: Ready=True with a fresh heartbeat. Conditions merge
/// by `type`, so the others are left alone; the transition time moves only when Ready was not True.
pub fn node_ready_patch(node: &Node, now: Timestamp) -> Value {
    let was_ready = node
        .status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .and_then(|conditions| conditions.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|ready| ready.status == "True");
    let mut ready = json!({
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "sunk test agent is posting ready status",
        "lastHeartbeatTime": time(now),
    });
    if !was_ready {
        ready["lastTransitionTime"] = time(now);
    }
    json!({"status": {"conditions": [ready]}})
}

fn container_status<'a>(pod: &'a Pod, name: &str) -> Option<&'a ContainerStatus> {
    let status = pod.status.as_ref()?;
    status.container_statuses.iter().chain(status.init_container_statuses.iter()).flatten().find(|s| s.name == name)
}

fn condition<'a>(pod: &'a Pod, kind: &str) -> Option<&'a PodCondition> {
    pod.status.as_ref()?.conditions.as_ref()?.iter().find(|condition| condition.type_ == kind)
}

fn running_since(status: &ContainerStatus) -> Option<Timestamp> {
    status.state.as_ref()?.running.as_ref()?.started_at.as_ref().map(|time| time.0)
}

/// Strategic-merge patch for the status of a pod whose containers all run. `first` describes the
/// process behind the first container (a slurmd) when the agent runs one; other containers run
/// nothing and keep what the pod already reports.
pub fn running_status(pod: &Pod, first: Option<&Run>, now: Timestamp) -> Value {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let containers: Vec<Value> = pod
        .spec
        .iter()
        .flat_map(|spec| spec.containers.iter())
        .enumerate()
        .map(|(index, container)| {
            let known = container_status(pod, &container.name);
            let run = first.filter(|_| index == 0);
            let restarts = run.map(|run| run.restarts).or(known.map(|known| known.restart_count)).unwrap_or(0);
            let started_at = run.map(|run| run.started_at).or(known.and_then(running_since)).unwrap_or(now);
            let image = container.image.clone().unwrap_or_default();
            let mut status = json!({
                "name": container.name,
                "image": image,
                "imageID": format!("fake://{image}"),
                "containerID": format!("fake://{uid}/{}", container.name),
                "ready": true,
                "started": true,
                "restartCount": restarts,
                "state": {"running": {"startedAt": time(started_at)}},
            });
            if let Some(exit) = run.and_then(|run| run.last_exit.as_ref()) {
                let mut terminated = json!({
                    "exitCode": exit.code,
                    "reason": if exit.code == 0 { "Completed" } else { "Error" },
                    "startedAt": time(exit.started_at),
                    "finishedAt": time(exit.finished_at),
                    "containerID": format!("fake://{uid}/{}", container.name),
                });
                if let Some(signal) = exit.signal {
                    terminated["signal"] = json!(signal);
                }
                status["lastState"] = json!({"terminated": terminated});
            }
            status
        })
        .collect();
    // Init containers ran to completion before the containers started; sidecars (restartPolicy
    // Always) run alongside them.
    let init_containers: Vec<Value> = pod
        .spec
        .iter()
        .flat_map(|spec| spec.init_containers.iter().flatten())
        .map(|container| {
            let image = container.image.clone().unwrap_or_default();
            let sidecar = container.restart_policy.as_deref() == Some("Always");
            let known = container_status(pod, &container.name);
            let started_at = known.and_then(running_since).unwrap_or(now);
            let state = if sidecar {
                json!({"running": {"startedAt": time(started_at)}})
            } else {
                json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": time(now), "finishedAt": time(now),
                    "containerID": format!("fake://{uid}/{}", container.name)}})
            };
            json!({
                "name": container.name,
                "image": image,
                "imageID": format!("fake://{image}"),
                "containerID": format!("fake://{uid}/{}", container.name),
                "ready": true,
                "started": sidecar,
                "restartCount": known.map_or(0, |known| known.restart_count),
                "state": state,
            })
        })
        .collect();
    let conditions: Vec<Value> = POD_CONDITIONS
        .iter()
        .map(|kind| {
            let since = condition(pod, kind)
                .filter(|known| known.status == "True")
                .and_then(|known| known.last_transition_time.as_ref())
                .map_or(now, |time| time.0);
            json!({"type": kind, "status": "True", "lastTransitionTime": time(since)})
        })
        .collect();
    let start_time = pod.status.as_ref().and_then(|status| status.start_time.as_ref()).map_or(now, |time| time.0);
    let mut status = json!({
        "phase": "Running",
        "hostIP": "127.0.0.1",
        "hostIPs": [{"ip": "127.0.0.1"}],
        "podIP": "127.0.0.1",
        "podIPs": [{"ip": "127.0.0.1"}],
        "startTime": time(start_time),
        "conditions": conditions,
        "containerStatuses": containers,
    });
    if !init_containers.is_empty() {
        status["initContainerStatuses"] = json!(init_containers);
    }
    if let Some(generation) = pod.metadata.generation {
        status["observedGeneration"] = json!(generation);
    }
    json!({"status": status})
}

/// Whether the pod already reports what [`running_status`] would write, so that the agent's own
/// status patches (which come back through the watch) do not cause further patches.
pub fn up_to_date(pod: &Pod, first: Option<&Run>) -> bool {
    let Some(status) = pod.status.as_ref() else { return false };
    if status.phase.as_deref() != Some("Running") || status.pod_ip.is_none() {
        return false;
    }
    if !POD_CONDITIONS.iter().all(|kind| condition(pod, kind).is_some_and(|c| c.status == "True")) {
        return false;
    }
    let init_reported = pod
        .spec
        .iter()
        .flat_map(|spec| spec.init_containers.iter().flatten())
        .all(|container| container_status(pod, &container.name).is_some());
    init_reported
        && pod.spec.iter().flat_map(|spec| spec.containers.iter()).enumerate().all(|(index, container)| {
            container_status(pod, &container.name).is_some_and(|known| {
                let restarts_match = match first.filter(|_| index == 0) {
                    Some(run) => known.restart_count == run.restarts,
                    None => true,
                };
                known.ready && running_since(known).is_some() && restarts_match
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn pod(extra_status: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u-1", "generation": 3},
            "spec": {"nodeName": "kube-node-1", "containers": [
                {"name": "slurmd", "image": "sunk/slurmd:26.05"},
                {"name": "sidecar"}
            ]},
            "status": extra_status,
        }))
        .unwrap()
    }

    #[test]
    fn times_are_whole_seconds_in_utc() {
        assert_eq!(time(at("2025-01-02T03:04:05.678Z")), json!("2025-01-02T03:04:05Z"));
    }

    #[test]
    fn a_new_pod_becomes_running_with_every_container_started() {
        let now = at("2025-01-02T03:04:05Z");
        let pod = pod(json!({"phase": "Pending"}));
        let patch = running_status(&pod, None, now);
        let status = &patch["status"];
        assert_eq!(status["phase"], "Running");
        assert_eq!(status["podIP"], "127.0.0.1");
        assert_eq!(status["hostIP"], "127.0.0.1");
        assert_eq!(status["podIPs"], json!([{"ip": "127.0.0.1"}]));
        assert_eq!(status["startTime"], "2025-01-02T03:04:05Z");
        assert_eq!(status["observedGeneration"], 3);
        let kinds: Vec<&str> =
            status["conditions"].as_array().unwrap().iter().map(|c| c["type"].as_str().unwrap()).collect();
        assert_eq!(kinds, POD_CONDITIONS);
        assert!(status["conditions"].as_array().unwrap().iter().all(|c| c["status"] == "True"));
        let containers = status["containerStatuses"].as_array().unwrap();
        assert_eq!(containers.len(), 2);
        assert_eq!(containers[0]["name"], "slurmd");
        assert_eq!(containers[0]["image"], "sunk/slurmd:26.05");
        assert_eq!(containers[0]["containerID"], "fake://u-1/slurmd");
        assert_eq!(containers[0]["ready"], true);
        assert_eq!(containers[0]["started"], true);
        assert_eq!(containers[0]["restartCount"], 0);
        assert_eq!(containers[0]["state"]["running"]["startedAt"], "2025-01-02T03:04:05Z");
        assert!(containers[0].get("lastState").is_none());
        assert_eq!(containers[1]["image"], "");
    }

    #[test]
    fn a_restarted_slurmd_reports_its_restarts_and_last_exit() {
        let now = at("2025-01-02T03:10:00Z");
        let run = Run {
            restarts: 2,
            started_at: at("2025-01-02T03:09:59Z"),
            last_exit: Some(Exit {
                code: 143,
                signal: Some(15),
                started_at: at("2025-01-02T03:00:00Z"),
                finished_at: at("2025-01-02T03:09:58Z"),
            }),
        };
        let patch = running_status(&pod(json!({})), Some(&run), now);
        let slurmd = &patch["status"]["containerStatuses"][0];
        assert_eq!(slurmd["restartCount"], 2);
        assert_eq!(slurmd["state"]["running"]["startedAt"], "2025-01-02T03:09:59Z");
        assert_eq!(slurmd["lastState"]["terminated"]["exitCode"], 143);
        assert_eq!(slurmd["lastState"]["terminated"]["signal"], 15);
        assert_eq!(slurmd["lastState"]["terminated"]["reason"], "Error");
        assert_eq!(slurmd["lastState"]["terminated"]["finishedAt"], "2025-01-02T03:09:58Z");
        let sidecar = &patch["status"]["containerStatuses"][1];
        assert_eq!(sidecar["restartCount"], 0);
        assert!(sidecar.get("lastState").is_none());
    }

    #[test]
    fn known_times_are_kept() {
        let pod = pod(json!({
            "phase": "Running",
            "startTime": "2025-01-01T00:00:00Z",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2025-01-01T00:00:01Z"}],
            "containerStatuses": [{"name": "sidecar", "image": "", "imageID": "", "ready": true, "restartCount": 4,
                "state": {"running": {"startedAt": "2025-01-01T00:00:02Z"}}}],
        }));
        let patch = running_status(&pod, None, at("2025-01-02T00:00:00Z"));
        let status = &patch["status"];
        assert_eq!(status["startTime"], "2025-01-01T00:00:00Z");
        let ready = status["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Ready").unwrap();
        assert_eq!(ready["lastTransitionTime"], "2025-01-01T00:00:01Z");
        assert_eq!(status["containerStatuses"][1]["restartCount"], 4);
        assert_eq!(status["containerStatuses"][1]["state"]["running"]["startedAt"], "2025-01-01T00:00:02Z");
    }

    #[test]
    fn up_to_date_once_the_patch_is_applied() {
        let run = Run { restarts: 0, started_at: at("2025-01-02T03:04:05Z"), last_exit: None };
        let pending = pod(json!({"phase": "Pending"}));
        assert!(!up_to_date(&pending, Some(&run)));
        let patched = running_status(&pending, Some(&run), at("2025-01-02T03:04:06Z"));
        let mut running = pending.clone();
        running.status = Some(serde_json::from_value(patched["status"].clone()).unwrap());
        assert!(up_to_date(&running, Some(&run)));
        assert!(up_to_date(&running, None));
        let restarted = Run { restarts: 1, ..run };
        assert!(!up_to_date(&running, Some(&restarted)));
    }

    #[test]
    fn init_containers_completed_and_sidecars_running() {
        let mut pod = pod(json!({"phase": "Pending"}));
        pod.spec.as_mut().unwrap().init_containers = Some(
            serde_json::from_value(json!([
                {"name": "setup", "image": "busybox"},
                {"name": "proxy", "image": "envoy", "restartPolicy": "Always"}
            ]))
            .unwrap(),
        );
        let patch = running_status(&pod, None, at("2025-01-02T03:04:05Z"));
        let init = patch["status"]["initContainerStatuses"].as_array().unwrap();
        assert_eq!(init[0]["state"]["terminated"]["exitCode"], 0);
        assert_eq!(init[0]["state"]["terminated"]["reason"], "Completed");
        assert_eq!(init[0]["started"], false);
        assert_eq!(init[1]["state"]["running"]["startedAt"], "2025-01-02T03:04:05Z");
        assert_eq!(init[1]["started"], true);
        assert!(!up_to_date(&pod, None));
        pod.status = Some(serde_json::from_value(patch["status"].clone()).unwrap());
        assert!(up_to_date(&pod, None));
    }

    #[test]
    fn node_heartbeat_moves_the_transition_time_only_on_a_transition() {
        let now = at("2025-01-02T03:04:05Z");
        let node = |status: &str| -> Node {
            serde_json::from_value(json!({"metadata": {"name": "n"}, "status": {"conditions": [
                {"type": "Ready", "status": status, "lastTransitionTime": "2025-01-01T00:00:00Z"}]}}))
            .unwrap()
        };
        let patch = node_ready_patch(&node("True"), now);
        let ready = &patch["status"]["conditions"][0];
        assert_eq!(ready["type"], "Ready");
        assert_eq!(ready["status"], "True");
        assert_eq!(ready["reason"], "KubeletReady");
        assert_eq!(ready["lastHeartbeatTime"], "2025-01-02T03:04:05Z");
        assert!(ready.get("lastTransitionTime").is_none());
        let patch = node_ready_patch(&node("Unknown"), now);
        assert_eq!(patch["status"]["conditions"][0]["lastTransitionTime"], "2025-01-02T03:04:05Z");
    }
}
