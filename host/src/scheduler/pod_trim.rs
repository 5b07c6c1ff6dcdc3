//! What of a pod the scheduler keeps in its store: what it and its policies read, not what a kubelet
//! needs to run the pod. A pod's volumes are most of its size in memory (`Volume` is 3 KB before its
//! sources: the service-account volume every pod is given costs 6 KB): 10,000 waiting pods held
//! 80 MB, most of the leader's heap (docs/benchmarks.md, scale-bench). Nothing is ever written back
//! from the store, so nothing trimmed here reaches the API server.

use k8s_openapi::api::core::v1::{Container, Pod};
use kube::ResourceExt;

/// Drops from `pod` what the scheduler never reads: managed fields, volumes, and each container's
/// environment, mounts, command and probes. Names, resources, placement rules, priority, labels,
/// annotations and status stay, so the policies see the same pod (`pod_record`).
pub fn trim(pod: &mut Pod) {
    pod.managed_fields_mut().clear();
    let Some(spec) = pod.spec.as_mut() else { return };
    spec.volumes = None;
    let init = spec.init_containers.iter_mut().flatten();
    for container in spec.containers.iter_mut().chain(init) {
        trim_container(container);
    }
}

fn trim_container(container: &mut Container) {
    container.env = None;
    container.env_from = None;
    container.volume_mounts = None;
    container.volume_devices = None;
    container.command = None;
    container.args = None;
    container.liveness_probe = None;
    container.readiness_probe = None;
    container.startup_probe = None;
    container.lifecycle = None;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::pod_record;

    /// A pod as the API server gives it: a service-account volume, mounts, environment, probes.
    fn full_pod() -> Pod {
        let container = serde_json::json!({
            "name": "main", "image": "busybox", "command": ["sleep"], "args": ["3600"],
            "env": [{"name": "A", "value": "1"}], "envFrom": [{"configMapRef": {"name": "c"}}],
            "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets"}],
            "readinessProbe": {"exec": {"command": ["true"]}},
            "resources": {"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": "1"}}
        });
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ml", "uid": "u1", "labels": {"app": "x"},
                         "annotations": {"sunk.dev/partition": "gpu"},
                         "managedFields": [{"manager": "kubectl", "operation": "Update"}]},
            "spec": {
                "schedulerName": "sunk", "priority": 100, "terminationGracePeriodSeconds": 10,
                "nodeSelector": {"zone": "a"},
                "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "initContainers": [container.clone()],
                "containers": [container],
                "volumes": [{"name": "kube-api-access", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
                ]}}]
            },
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]}
        }))
        .expect("a pod")
    }

    #[test]
    fn a_trimmed_pod_is_the_same_pod_to_the_policies_and_the_scheduler() {
        let full = full_pod();
        let mut trimmed = full.clone();
        trim(&mut trimmed);
        assert_eq!(pod_record(&trimmed), pod_record(&full));
        let (spec, full_spec) = (trimmed.spec.as_ref().unwrap(), full.spec.as_ref().unwrap());
        assert_eq!(spec.containers[0].resources, full_spec.containers[0].resources);
        assert_eq!(spec.containers[0].name, "main");
        assert_eq!((&spec.tolerations, &spec.node_selector), (&full_spec.tolerations, &full_spec.node_selector));
        assert_eq!(trimmed.status, full.status);
        assert_eq!((spec.volumes.as_ref(), spec.containers[0].env.as_ref()), (None, None));
        assert!(trimmed.managed_fields().is_empty());
    }
}
