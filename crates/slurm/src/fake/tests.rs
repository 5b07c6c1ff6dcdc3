use super::*;
use crate::{JobUpdate, JobsPage, NodeUpdate, Slurm};

fn job(name: &str, cpus: u32) -> JobDescription {
    JobDescription { name: name.into(), cpus_per_task: cpus, ..Default::default() }
}

fn state(slurm: &FakeSlurm, id: u32) -> String {
    slurm.all_jobs().into_iter().find(|job| job.job_id == id).expect("a job").state_name()
}

#[tokio::test]
async fn jobs_start_where_they_fit_and_wait_for_room_in_priority_order() {
    let slurm = FakeSlurm::with_nodes("n", 2, 2);
    let a = slurm.submit(&job("a", 2)).await.unwrap();
    let b = slurm.submit(&job("b", 2)).await.unwrap();
    let low = slurm.submit(&JobDescription { priority: Some(NoValue::of(1)), ..job("low", 2) }).await.unwrap();
    let high = slurm.submit(&JobDescription { priority: Some(NoValue::of(9)), ..job("high", 2) }).await.unwrap();
    assert_eq!([state(&slurm, a), state(&slurm, b)], ["RUNNING", "RUNNING"]);
    assert_eq!(slurm.node("n-1").unwrap().state[0], "ALLOCATED");
    slurm.finish(&a.to_string(), "COMPLETED");
    assert_eq!([state(&slurm, high), state(&slurm, low)], ["RUNNING", "PENDING"]);
}

#[tokio::test]
async fn a_multi_node_job_takes_one_node_each_or_waits() {
    let slurm = FakeSlurm::with_nodes("n", 2, 2);
    let two = slurm.submit(&JobDescription { minimum_nodes: Some(2), ..job("two", 1) }).await.unwrap();
    let job = slurm.job(&two).await.unwrap().unwrap();
    assert_eq!(job.nodes, "n-1,n-2");
    let three = slurm.submit(&JobDescription { minimum_nodes: Some(3), ..job_named("three") }).await.unwrap();
    assert_eq!(state(&slurm, three), "PENDING");
}

fn job_named(name: &str) -> JobDescription {
    job(name, 1)
}

#[tokio::test]
async fn an_array_is_a_record_per_task_each_named_by_its_task() {
    let slurm = FakeSlurm::with_nodes("n", 1, 2);
    let array = slurm.submit(&JobDescription { array: Some("0-2".into()), ..job("arr", 1) }).await.unwrap();
    let targets: Vec<String> = slurm.all_jobs().iter().map(Job::target).collect();
    assert_eq!(targets, [format!("{array}_0"), format!("{array}_1"), format!("{array}_2")]);
    slurm.cancel(&format!("{array}_1")).await.unwrap();
    assert_eq!(slurm.live_jobs().len(), 2);
    slurm.cancel(&array).await.unwrap();
    assert!(slurm.live_jobs().is_empty(), "the array's id names every task");
}

#[tokio::test]
async fn an_update_naming_an_array_task_is_refused_and_an_id_updates_its_own_record() {
    let slurm = FakeSlurm::with_nodes("n", 1, 2);
    let array = slurm.submit(&JobDescription { array: Some("0-1".into()), ..job("arr", 1) }).await.unwrap();
    let exclude = JobUpdate { excluded_nodes: Some(vec!["n-1".into()]), ..Default::default() };
    let refused = slurm.update_job(&format!("{array}_1"), &exclude).await.unwrap_err();
    assert!(refused.refuses_a_task_update(), "{refused}");
    let task1 = slurm.all_jobs().into_iter().find(|job| job.target() == format!("{array}_1")).unwrap();
    slurm.update_job(&task1.update_id().unwrap(), &exclude).await.unwrap();
    let excluded =
        |slurm: &FakeSlurm| slurm.all_jobs().iter().map(|job| job.excluded_nodes.clone()).collect::<Vec<_>>();
    assert_eq!(excluded(&slurm), ["", "n-1"], "a task's own record is updated alone");
    slurm.update_job(&array, &exclude).await.unwrap();
    assert_eq!(excluded(&slurm), ["n-1", "n-1"], "the array's id names its own record");
}

#[tokio::test]
async fn a_drained_node_takes_no_new_job_and_an_unknown_node_is_error_2018() {
    let slurm = FakeSlurm::with_nodes("n", 1, 2);
    slurm.update_node("n-1", &NodeUpdate::drain("k8s: test")).await.unwrap();
    let id = slurm.submit(&job("a", 1)).await.unwrap();
    assert_eq!(state(&slurm, id), "PENDING");
    let refused = slurm.submit(&JobDescription { required_nodes: vec!["gone".into()], ..job("b", 1) }).await;
    assert!(refused.unwrap_err().names_a_vanished_node());
}

#[tokio::test]
async fn excluded_nodes_are_read_as_host_lists() {
    let slurm = FakeSlurm::with_nodes("n", 3, 1);
    let excluding = |list: &str| JobDescription { excluded_nodes: vec![list.into()], ..job("a", 1) };
    let id = slurm.submit(&excluding("n-[1-2]")).await.unwrap();
    assert_eq!(slurm.job(&id).await.unwrap().unwrap().nodes, "n-3");
    let refused = slurm.submit(&excluding("n-[3-4]")).await;
    assert!(refused.unwrap_err().names_a_vanished_node(), "n-4 is not a node");
}

#[tokio::test]
async fn a_refused_immediate_allocation_leaves_an_ended_record() {
    let slurm = FakeSlurm::with_nodes("n", 1, 2);
    slurm.submit(&job("full", 2)).await.unwrap();
    let refused = slurm.allocate(&JobDescription { immediate: Some(true), ..job("now", 1) }).await;
    assert!(matches!(refused, Err(SlurmError::NotSubmitted(_))));
    assert_eq!(slurm.all_jobs().last().unwrap().state_name(), "CANCELLED");
}

#[tokio::test]
async fn listings_say_unchanged_until_something_changes_and_an_outage_answers_nothing() {
    let slurm = FakeSlurm::with_nodes("n", 1, 2);
    let JobsPage::All { last_update, .. } = slurm.jobs(None).await.unwrap() else { panic!("a listing") };
    assert!(matches!(slurm.jobs(Some(last_update)).await.unwrap(), JobsPage::Unchanged));
    slurm.submit(&job("a", 1)).await.unwrap();
    assert!(matches!(slurm.jobs(Some(last_update)).await.unwrap(), JobsPage::All { .. }));
    slurm.set_reachable(false);
    assert!(slurm.jobs(None).await.unwrap_err().is_unanswered());
}

#[tokio::test]
async fn a_job_of_a_user_slurmctld_cannot_resolve_is_held_until_released() {
    let slurm = FakeSlurm::with_nodes("n", 1, 2);
    slurm.forget_user(1500);
    let id = slurm.submit(&JobDescription { user_id: Some("1500".into()), ..job("a", 1) }).await.unwrap();
    let held = slurm.job(&id).await.unwrap().unwrap();
    assert_eq!(
        (held.state_name().as_str(), held.state_reason.as_str(), held.system_comment.as_str(), held.user_id),
        ("PENDING", "JobHeldAdmin", "slurm_cred_create failure, holding job.", Some(1500))
    );
    slurm.release(&id.to_string());
    assert_eq!(slurm.job(&id).await.unwrap().unwrap().state_reason, "JobHeldAdmin", "released, and held again");
    slurm.add_user(1500);
    slurm.release(&id.to_string());
    assert_eq!(state(&slurm, id), "RUNNING");
}

#[tokio::test]
async fn one_node_is_read_as_it_is_now_and_changes_nothing() {
    let slurm = FakeSlurm::with_nodes("n", 1, 2);
    slurm.update_node("n-1", &NodeUpdate::drain("admin: bad dimm")).await.unwrap();
    let read = Slurm::node(&slurm, "n-1").await.unwrap().expect("a known node");
    assert_eq!((read.flags().is_draining(), read.reason.as_str()), (true, "admin: bad dimm"));
    assert_eq!(Slurm::node(&slurm, "n-9").await.unwrap(), None, "an unknown node is none");
    assert_eq!(slurm.requests(), ["drain n-1"], "a read is no request that changes something");
    slurm.set_reachable(false);
    assert!(Slurm::node(&slurm, "n-1").await.is_err(), "nor is it answered while unreachable");
}
