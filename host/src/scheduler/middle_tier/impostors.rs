//! slurmd pods are believed only when they are what they claim: a user's pod labelled
//! `sunk.dev/slurm-node` steers no pod, and a Slurm node that does not record its slurmd pod hosts
//! none.

use serde_json::json;

use super::World;
use crate::slurm::{NodeUpdate, Slurm};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_pod_labelled_as_a_slurmd_pod_steers_nothing() {
    let mut world = World::new().await;
    for (slurm_node, n) in [("slurm-1", 1), ("slurm-1", 2), ("slurm-2", 3), ("slurm-2", 4)] {
        world.impostor(&format!("impostor-{n}"), slurm_node, "kube-node-9");
    }
    for name in ["a", "b", "c", "d"] {
        world.create(name, "1", json!({}), json!({}));
    }
    world.settle().await;
    for name in ["a", "b", "c", "d"] {
        let job = world.job_of(name).expect("a job");
        assert_eq!(world.node_of(name), Some(job.nodes.replace("slurm", "kube-node")), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slurm_node_that_does_not_record_its_slurmd_pod_hosts_no_pod() {
    let mut world = World::new().await;
    for n in 1..=2 {
        // An administrator's comment, or a node the NodeSet controller has not yet recorded.
        world.slurm.update_node(&format!("slurm-{n}"), &NodeUpdate::comment("rack 4")).await.expect("a known node");
    }
    world.create("a", "1", json!({}), json!({}));
    world.settle().await;
    assert_eq!(world.node_of("a"), None, "not bound where no believed slurmd pod runs");
    // No Slurm node has a Node to run the pod on: nothing fits, and no job is asked for.
    assert_eq!(world.scheduled("a"), Some(("False".into(), "Unschedulable".into())));
    assert_eq!(world.job_of("a"), None);
}
