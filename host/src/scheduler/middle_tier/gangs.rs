//! Gangs: the pods of one group become one multi-node job, bound together, each to its own Node; a
//! group that cannot run says so on every member.

use serde_json::json;

use super::World;

fn member(world: &mut World, name: &str, group: &str, size: u32) {
    let labels = json!({"sunk.dev/pod-group": group});
    let annotations = json!({"sunk.dev/pod-group-size": size.to_string()});
    world.create(name, "1", labels, annotations);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_of_two_is_one_job_and_its_pods_are_bound_to_two_nodes() {
    let mut world = World::new().await;
    member(&mut world, "g-1", "g", 2);
    member(&mut world, "g-2", "g", 2);
    world.settle().await;
    let jobs = world.slurm.live_jobs();
    assert_eq!(jobs.len(), 1, "one job for the group: {jobs:?}");
    let (one, two) = (world.node_of("g-1").expect("bound"), world.node_of("g-2").expect("bound"));
    assert_ne!(one, two, "each member on its own node");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incomplete_group_asks_slurm_for_nothing() {
    let mut world = World::new().await;
    member(&mut world, "h-1", "h", 3);
    member(&mut world, "h-2", "h", 3);
    world.settle().await;
    assert!(world.slurm.all_jobs().is_empty());
    for name in ["h-1", "h-2"] {
        assert_eq!(world.scheduled(name), Some(("False".into(), "PodGroupIncomplete".into())), "{name}");
    }
}

/// A change in a group re-decides every member: with all three members of a 3-pod group on a 2-node
/// cluster, each says `Unschedulable`, not only the last one created (the others would say their
/// group is incomplete until their next recheck, a minute later).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_member_of_a_group_too_big_for_the_cluster_says_unschedulable() {
    let mut world = World::new().await;
    // Each member is passed over before the next arrives, as with pods created moments apart.
    for name in ["h-1", "h-2", "h-3"] {
        member(&mut world, name, "h", 3);
        world.settle().await;
    }
    for name in ["h-1", "h-2", "h-3"] {
        assert_eq!(world.scheduled(name), Some(("False".into(), "Unschedulable".into())), "{name}");
        assert_eq!(world.node_of(name), None);
    }
    assert!(world.slurm.live_jobs().is_empty(), "no allocation for a group that cannot run");
}

/// A member that finishes is not a member deleted: the gang's job holds the other member's node while
/// that member runs on, and goes when the last one finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_member_leaves_the_gang_running_until_the_last_one_finishes() {
    let mut world = World::new().await;
    member(&mut world, "f-1", "f", 2);
    member(&mut world, "f-2", "f", 2);
    world.settle().await;
    assert!(world.node_of("f-1").is_some() && world.node_of("f-2").is_some(), "both bound");
    world.succeed("f-1");
    world.settle().await;
    assert!(world.job_of("f-2").is_some(), "the job runs on for f-2: {:?}", world.slurm.live_jobs());
    assert!(world.pod("f-2").is_some_and(|pod| pod.metadata.deletion_timestamp.is_none()), "f-2 runs on");
    world.succeed("f-2");
    world.settle().await;
    assert!(world.slurm.live_jobs().is_empty(), "the last member's end ends the job");
}
