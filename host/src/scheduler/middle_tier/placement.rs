//! A waiting pod's job follows its placement rules as Nodes change, and its routine recheck asks
//! nothing of the job-mapper or Slurm while nothing it depends on has changed; a running job's pod
//! is bound only where its placement, judged again as it is assumed bound, still lets it run.

use serde_json::json;

use super::{NAMESPACE, World};
use crate::scheduler::executor;
use crate::scheduler::link::PodKey;
use crate::scheduler::placeholder::Placeholder;
use crate::scheduler::step::{Again, Plan, Step};
use crate::scheduler::timing::RETRY;
use crate::scheduler::watched_pod::WatchedPod;
use crate::slurm::{Job, NoValue};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_job_follows_a_taint_and_a_recheck_of_nothing_new_asks_nothing() {
    let mut world = World::new().await;
    for name in ["a", "b", "c"] {
        world.create(name, "2", json!({}), json!({}));
    }
    world.settle().await;
    let waiting = world.job_of("c").expect("c's job waits in Slurm");
    assert_eq!((waiting.state_name().as_str(), waiting.excluded_nodes.as_str()), ("PENDING", ""));

    let (decisions, requests) = (world.job_mapper_decisions(), world.slurm.requests());
    world.recheck().await;
    assert_eq!(world.job_mapper_decisions(), decisions, "the job-mapper is not asked again");
    assert_eq!(world.slurm.requests(), requests);

    let on_node_2 = if world.node_of("a").as_deref() == Some("kube-node-2") { "a" } else { "b" };
    world.taint("kube-node-2", "dedicated");
    world.settle().await;
    assert_eq!(world.job_of("c").expect("still waiting").excluded_nodes, "slurm-2", "{:?}", world.slurm.requests());
    assert!(world.job_mapper_decisions() > decisions, "a placement change is checked");

    // The room on slurm-2 frees first: c's job does not take it.
    world.slurm.finish(&world.job_of(on_node_2).expect("a job").target(), "COMPLETED");
    world.settle().await;
    assert_eq!(world.node_of("c"), None);
    let on_node_1 = if on_node_2 == "a" { "b" } else { "a" };
    world.slurm.finish(&world.job_of(on_node_1).expect("a job").target(), "COMPLETED");
    world.settle().await;
    assert_eq!(world.node_of("c").as_deref(), Some("kube-node-1"));
}

/// A cordon is the drain's to act on: with no drain yet, the pod is bound where Slurm ran its job,
/// not replaced (a replacement would exclude nothing more, and be given the same node again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_slurm_ran_on_a_cordoned_node_before_its_drain_is_bound_there() {
    let mut world = World::new().await;
    world.taint("kube-node-1", "node.kubernetes.io/unschedulable");
    world.taint("kube-node-2", "node.kubernetes.io/unschedulable");
    world.create("a", "1", json!({}), json!({}));
    world.settle().await;
    assert!(world.node_of("a").is_some(), "{:?}", world.slurm.requests());
    assert_eq!(world.slurm.all_jobs().len(), 1, "one job, not replaced");
}

/// A slurmd pod deleted under a job whose pod was not bound yet: the pod cannot be bound there, and
/// the NodeSet makes no new slurmd pod while a job holds the node. The job is replaced (the fake's
/// jobs read as started long ago, past the host's patience).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_on_a_node_whose_slurmd_pod_went_is_replaced_and_the_pod_bound_elsewhere() {
    let mut world = World::new().await;
    world.create("a", "1", json!({}), json!({}));
    world.recheck().await;
    let first = world.job_of("a").expect("a's job");
    assert_eq!((first.state_name().as_str(), world.node_of("a")), ("RUNNING", None), "submitted, not bound yet");
    let n: usize = first.nodes.trim_start_matches("slurm-").parse().expect("slurm-<n>");
    world.lose_slurmd(n);
    let writes = world.settle().await;
    assert!(writes.contains(&"event ml/a SlurmJobReplaced".to_string()), "{writes:?}");
    assert!(world.slurm.requests().contains(&format!("cancel {}", first.job_id)));
    assert_eq!(world.node_of("a"), Some(format!("kube-node-{}", 3 - n)));
}

/// Both Nodes full (pods x and y), pods a and b wait as one job array, a's task still the array's
/// record and b's with a record of its own. Returns the array's id.
async fn waiting_as_one_array() -> (World, u32) {
    let mut world = World::new().await;
    for name in ["x", "y"] {
        world.create(name, "2", json!({}), json!({}));
    }
    world.settle().await;
    for name in ["a", "b"] {
        world.create(name, "2", json!({}), json!({}));
    }
    let array = world.submit_as_one_array(&["a", "b"]).await;
    world.settle().await;
    (world, array)
}

/// Pods of one burst wait as one job array when a taint changes where they may run. A task with a
/// record of its own is updated alone; the task that is still the array's record cannot be (the
/// array's id names every task waiting in that record, and slurmrestd refuses a task's id), so its
/// pod gets a job of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taint_replaces_a_task_still_in_its_arrays_record_and_updates_one_with_a_record_of_its_own() {
    let (mut world, array) = waiting_as_one_array().await;
    let task = |world: &World, n: u32| {
        world.slurm.live_jobs().into_iter().find(|job| job.target() == format!("{array}_{n}")).expect("a live task")
    };
    let (task_0, task_1) = (task(&world, 0), task(&world, 1));
    assert_eq!((task_0.state_name().as_str(), task_0.update_id()), ("PENDING", None), "the array's record");
    assert!(task_1.update_id().is_some_and(|id| id != array), "a record of its own");

    world.taint("kube-node-2", "dedicated");
    let writes = world.settle().await;
    let requests = world.slurm.requests();
    assert!(!requests.iter().any(|r| r.starts_with(&format!("update {array}_"))), "{requests:?}");
    assert_eq!(task(&world, 1).excluded_nodes, "slurm-2", "{requests:?}");
    assert!(requests.contains(&format!("cancel {array}_0")), "{requests:?}");
    assert!(writes.contains(&"event ml/a SlurmJobReplaced".to_string()), "{writes:?}");
    let own_job = world
        .slurm
        .live_jobs()
        .into_iter()
        .find(|job| job.admin_comment.contains("uid-a") && job.array_task().is_none());
    let own_job = own_job.expect("a job of a's own");
    assert_eq!((own_job.state_name().as_str(), own_job.excluded_nodes.as_str()), ("PENDING", "slurm-2"));
    assert_eq!(world.node_of("a"), None);
}

/// The task still in its array's record is replaced without a mark Slurm keeps (it cannot be
/// updated alone), and its successor is not submitted: no node fits the pod any more. The cancelled
/// task is still the host's own replacement, not the end of the pod: the pod waits, saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_whose_unmarked_task_was_replaced_and_nothing_fits_waits_and_is_not_deleted() {
    let (mut world, array) = waiting_as_one_array().await;

    world.taint("kube-node-1", "dedicated");
    world.taint("kube-node-2", "dedicated");
    world.settle().await;
    assert!(world.slurm.requests().contains(&format!("cancel {array}_0")), "{:?}", world.slurm.requests());
    world.recheck().await;
    let writes = world.settle().await;
    assert!(world.pod("a").is_some(), "the pod was deleted: {writes:?}");
    assert_eq!(world.scheduled("a"), Some(("False".into(), "Unschedulable".into())));
}

/// A pass assumes its pod bound before it binds it, judging the pod's placement again as one step with
/// the assumption when its rules concern other pods. Refused then (here: the job's node has no slurmd
/// pod, long after the job started), nothing more of the plan is taken, nothing is assumed, and the
/// pod is looked at again shortly; not refused, the pod is assumed and bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_assumption_ends_the_plan_before_the_binding() {
    let mut world = World::new().await;
    world.create("a", "1", json!({}), json!({}));
    let pod = WatchedPod::from(&world.pod("a").expect("a"));
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let an_hour_ago = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() - 3600;
    let job = Job {
        job_id: 9,
        job_state: vec!["RUNNING".into()],
        nodes: "slurm-9".into(),
        start_time: NoValue::of(an_hour_ago),
        ..Default::default()
    };
    let key = PodKey { namespace: NAMESPACE.into(), name: "a".into(), uid: uid.clone() };
    let placeholder = Placeholder { pod: key, job };
    let plan = |recheck| Plan {
        steps: vec![
            Step::Assume { node: "kube-node-1".into(), recheck },
            Step::Bind { node: "kube-node-1".into(), note: "bound".into(), allocated: None },
        ],
        again: Again::OnChange,
    };

    let refused = executor::execute(&world.ctx, &pod, plan(Some(Box::new(placeholder)))).await.expect("no write fails");
    assert_eq!(refused, Again::After(RETRY));
    assert_eq!((world.node_of("a"), world.ctx.assumed.node_of(&uid)), (None, None), "neither bound nor assumed");

    let bound = executor::execute(&world.ctx, &pod, plan(None)).await.expect("the binding is made");
    assert_eq!(bound, Again::OnChange);
    assert_eq!(world.node_of("a").as_deref(), Some("kube-node-1"));
    assert_eq!(world.ctx.assumed.node_of(&uid).as_deref(), Some("kube-node-1"));
}
