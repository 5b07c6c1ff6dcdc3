//! One pod, one job: submitted, bound where Slurm runs it, waiting while Slurm has no room, deleted
//! when its job ends, its job cancelled when it goes.

use serde_json::json;

use super::World;

fn none() -> serde_json::Value {
    json!({})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_is_bound_to_the_node_whose_slurmd_runs_its_job() {
    let mut world = World::new().await;
    world.create("a", "1", none(), none());
    let writes = world.settle().await;
    let job = world.job_of("a").expect("a placeholder job for the pod");
    assert_eq!(job.state_name(), "RUNNING");
    let kube_node = job.nodes.replace("slurm", "kube-node");
    assert_eq!(world.node_of("a"), Some(kube_node.clone()));
    assert!(writes.contains(&format!("bind pods/ml/a {kube_node}")), "{writes:?}");
    assert_eq!(world.slurm.live_jobs().len(), 1, "one job for one pod");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_slurm_has_no_room_for_waits_unschedulable_and_takes_the_room_its_job_is_given() {
    let mut world = World::new().await;
    for name in ["a", "b", "c"] {
        world.create(name, "2", none(), none());
    }
    world.settle().await;
    assert!(world.node_of("a").is_some() && world.node_of("b").is_some());
    assert_eq!(world.node_of("c"), None);
    assert_eq!(world.scheduled("c"), Some(("False".into(), "Unschedulable".into())));
    assert_eq!(world.job_of("c").expect("c's job waits in Slurm").state_name(), "PENDING");

    // a's job ends (its work is done): a is deleted, and c's job starts where a's ran.
    let freed = world.node_of("a");
    world.slurm.finish(&world.job_of("a").unwrap().target(), "COMPLETED");
    let writes = world.settle().await;
    assert!(writes.contains(&"delete pods/ml/a".to_string()), "{writes:?}");
    assert_eq!(world.node_of("c"), freed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_pod_cancels_its_job() {
    let mut world = World::new().await;
    world.create("a", "1", none(), none());
    world.create("b", "2", none(), none());
    world.create("c", "2", none(), none());
    world.settle().await;
    let (running, pending) = (world.job_of("a").unwrap(), world.job_of("c").unwrap());
    assert_eq!(pending.state_name(), "PENDING");

    world.delete("a");
    world.delete("c");
    world.settle().await;
    let requests = world.slurm.requests();
    for job in [running, pending] {
        assert!(
            requests.contains(&format!("cancel {}", job.target())),
            "job {} not cancelled: {requests:?}",
            job.job_id
        );
    }
    assert_eq!(world.slurm.live_jobs().len(), 1, "only b's job is left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_fails_before_it_runs_leaves_its_pod_pending_saying_why() {
    let mut world = World::new().await;
    for name in ["a", "b", "c"] {
        world.create(name, "2", none(), none());
    }
    world.settle().await;
    world.slurm.finish(&world.job_of("c").unwrap().target(), "FAILED");
    world.settle().await;
    assert!(world.pod("c").is_some(), "the pod stays, so nothing is lost");
    assert_eq!(world.scheduled("c"), Some(("False".into(), "SlurmJobFailed".into())));
    assert_eq!(world.job_of("c"), None, "and nothing is retried blindly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_the_job_mapper_refuses_gets_no_job_and_says_which_field() {
    let mut world = World::new().await;
    world.create("a", "1", none(), json!({"sunk.dev/priority": "soon"}));
    let writes = world.settle().await;
    assert_eq!(world.scheduled("a"), Some(("False".into(), "PolicyRejected".into())));
    assert!(
        writes.contains(&"event ml/a PolicyRejected".to_string()) || writes.iter().any(|w| w.starts_with("event ml/a")),
        "{writes:?}"
    );
    assert!(world.slurm.all_jobs().is_empty(), "no job for a refused pod");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_job_for_one_pod_is_cancelled_and_the_first_kept() {
    let mut world = World::new().await;
    world.create("a", "1", none(), none());
    world.settle().await;
    let first = world.job_of("a").unwrap();
    // A submission whose answer was lost, granted after all: the same link, a second job.
    world.slurm.duplicate(first.job_id);
    world.settle().await;
    let live = world.slurm.live_jobs();
    assert_eq!(live.iter().map(|job| job.job_id).collect::<Vec<_>>(), [first.job_id], "{live:?}");
    assert!(world.node_of("a").is_some());
}

/// slurmctld restarting under a submission is no refusal: the pod is submitted again as soon as a
/// listing shows the job was not made, not after the minute a refused pod waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submission_cut_off_by_a_slurmctld_restart_is_retried_at_once() {
    let mut world = World::new().await;
    world.slurm.reset_next_write();
    world.create("a", "1", none(), none());
    world.settle().await;
    assert!(world.node_of("a").is_some(), "bound once a listing showed no job");
    assert_eq!(world.slurm.live_jobs().len(), 1);
}
