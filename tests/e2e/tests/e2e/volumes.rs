//! A pod's claimed volumes decide where it may run: a PersistentVolume whose node affinity names one
//! Node puts the pod there (the other Slurm node excluded from its placeholder), a claim not bound
//! yet waits `VolumeNotReady`, and a claim of a WaitForFirstConsumer class, whose node sunk cannot
//! choose, waits `Unsupported` naming the volume. No placeholder is submitted for a pod that waits.

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use sunk_e2e::{Cluster, is_running, node_name, pod, scheduled_condition};

const WAIT: Duration = Duration::from_secs(60);
const NODE: &str = "kube-node-2";

/// Deletes the cluster-scoped objects a test made, whatever its outcome: its namespace's deletion
/// does not reach them.
struct ClusterScoped {
    volume: String,
    class: String,
}

impl Drop for ClusterScoped {
    fn drop(&mut self) {
        let _ = sunk_e2e::kubectl(&["delete", "pv", &self.volume, "--ignore-not-found", "--wait=false"]).output();
        let _ = sunk_e2e::kubectl(&["delete", "storageclass", &self.class, "--ignore-not-found"]).output();
    }
}

/// A sunk pod mounting claim `claim` as its first volume.
fn claiming_pod(name: &str, claim: &str) -> serde_json::Value {
    let mut pod = pod(name, "100m", "64Mi");
    pod["spec"]["volumes"] = serde_json::json!([{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]);
    pod["spec"]["containers"][0]["volumeMounts"] = serde_json::json!([{"name": "data", "mountPath": "/data"}]);
    pod
}

fn claim(name: &str, class: &str, volume: Option<&str>) -> anyhow::Result<PersistentVolumeClaim> {
    let mut spec = serde_json::json!({
        "accessModes": ["ReadWriteOnce"], "storageClassName": class, "resources": {"requests": {"storage": "1Gi"}}
    });
    if let Some(volume) = volume {
        spec["volumeName"] = volume.into();
    }
    Ok(serde_json::from_value(serde_json::json!({"metadata": {"name": name}, "spec": spec}))?)
}

/// The pod's `PodScheduled` reason and message, once `reason` is it.
async fn waits(cluster: &Cluster, name: &str, reason: &str) -> anyhow::Result<String> {
    let waiting = cluster
        .wait_pod(name, &format!("{name} to wait {reason}"), WAIT, |pod| {
            scheduled_condition(pod).is_some_and(|(status, why, _)| status == "False" && why == reason)
        })
        .await?;
    Ok(scheduled_condition(&waiting).map(|(_, _, message)| message).unwrap_or_default())
}

#[tokio::test]
async fn a_pod_goes_where_its_volume_can_be_mounted_or_waits_naming_it() -> anyhow::Result<()> {
    let mut cluster = Cluster::connect("volumes").await?;
    cluster.start_host(&[("SUNK_NODESET_NAMESPACE", "slurm")])?;
    let scoped =
        ClusterScoped { volume: format!("{}-local", cluster.namespace), class: format!("{}-wffc", cluster.namespace) };

    // A claim that is not there yet: the pod waits for it, and nothing goes to Slurm.
    let local = cluster.create_pod(claiming_pod("local", "data")).await?;
    let message = waits(&cluster, "local", "VolumeNotReady").await?;
    assert!(message.contains("\"data\" not found"), "{message}");
    let uid = local.metadata.uid.clone().unwrap_or_default();
    assert!(cluster.jobs_of(&uid).await?.is_empty(), "no placeholder for a pod whose claim is missing");

    // A volume on one Node only, and the claim bound to it: the pod goes there and mounts it.
    let volume: PersistentVolume = serde_json::from_value(serde_json::json!({
        "metadata": {"name": scoped.volume},
        "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
            "hostPath": {"path": format!("/tmp/sunk-e2e-{}", cluster.namespace), "type": "DirectoryOrCreate"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE]}]}]}}
        }
    }))?;
    Api::<PersistentVolume>::all(cluster.kube.clone()).create(&PostParams::default(), &volume).await?;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(cluster.kube.clone(), &cluster.namespace);
    claims.create(&PostParams::default(), &claim("data", "", Some(&scoped.volume))?).await?;
    let running = cluster.wait_pod("local", "the pod to run where its volume is", WAIT, is_running).await?;
    assert_eq!(node_name(&running), Some(NODE));
    let other = cluster.slurm_node_on("kube-node-1").await?.expect("a Slurm node on kube-node-1");
    let placeholder = cluster.jobs_of(&uid).await?.into_iter().next().expect("a placeholder");
    assert!(placeholder.excluded_nodes.contains(&other), "the other Slurm node is excluded: {placeholder:?}");

    // A class whose volumes are bound for the first pod that uses them: sunk does not choose a
    // volume's node, so it says so instead of placing the pod where the volume may never reach.
    let class: StorageClass = serde_json::from_value(serde_json::json!({
        "metadata": {"name": scoped.class},
        "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"
    }))?;
    Api::<StorageClass>::all(cluster.kube.clone()).create(&PostParams::default(), &class).await?;
    claims.create(&PostParams::default(), &claim("late", &scoped.class, None)?).await?;
    let late = cluster.create_pod(claiming_pod("late-pod", "late")).await?;
    let message = waits(&cluster, "late-pod", "Unsupported").await?;
    assert!(message.contains("spec.volumes[0] (claim late)") && message.contains("WaitForFirstConsumer"), "{message}");
    let uid = late.metadata.uid.clone().unwrap_or_default();
    assert!(cluster.jobs_of(&uid).await?.is_empty(), "no placeholder for a pod sunk cannot place");

    cluster.delete_pod("local").await?;
    claims.delete("data", &DeleteParams::default()).await?;
    Ok(())
}
