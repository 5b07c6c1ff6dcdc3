//! A pod mounting a claim goes only where its volume can be mounted, waits for a claim not ready, and
//! is refused, named, where sunk would have to choose the volume's Node.

use serde_json::json;

use super::World;

/// `(status, reason)` of a pod's `PodScheduled` condition.
fn waits(reason: &str) -> Option<(String, String)> {
    Some(("False".into(), reason.into()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_mounting_a_local_volume_is_bound_to_the_node_the_volume_is_on() {
    let mut world = World::new().await;
    world.volume("pv-local", Some("kube-node-2"));
    world.claim("data", json!({"volumeName": "pv-local"}));
    world.create_mounting("a", "data");
    world.settle().await;
    assert_eq!(world.node_of("a").as_deref(), Some("kube-node-2"), "{:?}", world.slurm.requests());
    assert_eq!(world.job_of("a").expect("a's job").excluded_nodes, "slurm-1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_not_bound_yet_is_waited_for_and_one_waiting_for_its_first_consumer_is_unsupported() {
    let mut world = World::new().await;
    world.create_mounting("a", "data");
    world.settle().await;
    assert_eq!(world.scheduled("a"), waits("VolumeNotReady"));
    assert_eq!(world.job_of("a"), None, "nothing is submitted for it");

    world.storage_class("fast", "Immediate");
    world.claim("data", json!({"storageClassName": "fast"}));
    world.recheck().await;
    assert_eq!(world.scheduled("a"), waits("VolumeNotReady"));
    world.volume("pv-1", Some("kube-node-1"));
    world.claim("data", json!({"storageClassName": "fast", "volumeName": "pv-1"}));
    world.recheck().await;
    world.settle().await;
    assert_eq!(world.node_of("a").as_deref(), Some("kube-node-1"));

    world.storage_class("local-path", "WaitForFirstConsumer");
    world.claim("late", json!({"storageClassName": "local-path"}));
    world.create_mounting("b", "late");
    let writes = world.settle().await;
    assert_eq!(world.scheduled("b"), waits("Unsupported"));
    assert!(writes.contains(&"event ml/b FailedScheduling".to_string()), "{writes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_reads_no_claims_places_no_pod_that_mounts_one() {
    let mut world = World::new().await;
    world.without_volume_topology();
    world.create_mounting("a", "data");
    world.create("b", "1", json!({}), json!({}));
    world.settle().await;
    assert_eq!(world.scheduled("a"), waits("Unsupported"));
    assert!(world.node_of("b").is_some(), "a pod without a claim is placed as before");
}

/// A volume that now reaches one Node only (its node affinity changed while the pod's job started
/// elsewhere): the pod is not bound where the volume cannot be mounted, its job is replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_slurm_ran_where_the_volume_cannot_be_mounted_is_replaced() {
    let mut world = World::new().await;
    world.volume("pv", None);
    world.claim("data", json!({"volumeName": "pv"}));
    world.create_mounting("a", "data");
    world.recheck().await;
    let first = world.job_of("a").expect("a's job");
    assert_eq!((first.state_name().as_str(), world.node_of("a")), ("RUNNING", None), "submitted, not bound yet");
    let other = if first.nodes == "slurm-1" { "kube-node-2" } else { "kube-node-1" };
    world.volume("pv", Some(other));
    let writes = world.settle().await;
    assert!(writes.contains(&"event ml/a SlurmJobReplaced".to_string()), "{writes:?}");
    assert_eq!(world.node_of("a").as_deref(), Some(other));
}
