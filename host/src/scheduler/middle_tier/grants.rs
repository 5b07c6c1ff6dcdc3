//! Tenancy: a pod gets in Slurm only what its namespace is granted. Refused pods get no job and say
//! which annotation asked for what; the rest run as their grant's user.

use serde_json::json;

use super::{NAMESPACE, World};
use crate::tenancy::Tenancy;

fn message(world: &World, name: &str) -> String {
    let conditions = world.pod(name).and_then(|pod| pod.status?.conditions).unwrap_or_default();
    conditions.into_iter().find(|c| c.type_ == "PodScheduled").and_then(|c| c.message).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_fresh_install_placeholders_run_as_nobody_and_privileged_annotations_are_refused() {
    let mut world = World::new().await;
    world.create("plain", "1", json!({}), json!({}));
    world.create("as-root", "1", json!({}), json!({"sunk.dev/user-id": "0"}));
    world.create("first-in-line", "1", json!({}), json!({"sunk.dev/priority": "4294967293"}));
    world.create("elsewhere", "1", json!({}), json!({"sunk.dev/account": "physics"}));
    let writes = world.settle().await;

    let plain = world.job_of("plain").expect("a job for the plain pod");
    assert_eq!(plain.user_name, "nobody");
    assert!(world.node_of("plain").is_some());
    let refused = [
        ("as-root", "sunk.dev/user-id=\"0\"", "runs as user 65534, naming another is not granted"),
        ("first-in-line", "sunk.dev/priority=\"4294967293\"", "setting a priority is not granted"),
        ("elsewhere", "sunk.dev/account=\"physics\"", "no accounts granted"),
    ];
    for (name, asked, granted) in refused {
        assert_eq!(world.scheduled(name), Some(("False".into(), "NotGranted".into())), "{name}");
        let said = message(&world, name);
        assert!(said.contains(asked) && said.contains(granted) && said.contains(NAMESPACE), "{name}: {said}");
        assert!(writes.contains(&format!("event {NAMESPACE}/{name} FailedScheduling")), "{name}: {writes:?}");
        assert_eq!(world.job_of(name), None, "no job for {name}");
    }
    assert_eq!(world.slurm.all_jobs().len(), 1, "only the plain pod's job was ever submitted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_namespace_gets_its_user_and_what_it_may_name_and_no_more() {
    let tenancy = Tenancy::parse(
        r#"{"grants": [{"namespaces": ["ml"], "user": 1000, "group": 1000, "userIds": "1000-1999",
            "groupIds": "1000-1999", "accounts": ["ml"]}]}"#,
        "test",
    )
    .expect("a tenancy document");
    let mut world = World::granted(tenancy).await;
    world.create("own", "1", json!({}), json!({}));
    world.create("named", "1", json!({}), json!({"sunk.dev/user-id": "1500", "sunk.dev/account": "ml"}));
    world.create("beyond", "1", json!({}), json!({"sunk.dev/user-id": "2000"}));
    world.settle().await;

    assert_eq!(world.job_of("own").expect("a job").user_name, "1000");
    let named = world.job_of("named").expect("a job");
    assert_eq!((named.user_name.as_str(), named.account.as_str()), ("1500", "ml"));
    assert_eq!(world.scheduled("beyond"), Some(("False".into(), "NotGranted".into())));
    assert!(message(&world, "beyond").contains("runs as user 1000 or one of 1000-1999"));
    assert_eq!(world.job_of("beyond"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_granted_by_label_waits_until_its_labels_are_known_then_gets_that_grant() {
    let tenancy = Tenancy::parse(
        r#"{"grants": [{"namespaceSelector": {"matchLabels": {"team": "ml"}}, "user": 1000, "group": 1000}]}"#,
        "test",
    )
    .expect("a tenancy document");
    let mut world = World::granted(tenancy).await;
    world.create("early", "1", json!({}), json!({}));
    world.settle().await;
    // Neither the default grant nor a guess: no job until the namespace is listed.
    assert_eq!(world.scheduled("early"), Some(("False".into(), "GrantUnknown".into())));
    assert!(message(&world, "early").contains("namespace ml is not listed yet"), "{}", message(&world, "early"));
    assert!(world.slurm.all_jobs().is_empty());

    world.list_namespace(json!({"team": "ml"}));
    world.create("late", "1", json!({}), json!({}));
    world.settle().await;
    for name in ["early", "late"] {
        assert_eq!(world.job_of(name).expect("a job").user_name, "1000", "{name}");
    }
}

/// A pod granted a uid slurmctld resolves to no user: Slurm holds its job (it cannot create the job's
/// credential), and the pod says so as an error naming the uid and its grant, once. The job is kept:
/// once the user is added and the job released, the pod is bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_whose_uid_slurmctld_cannot_resolve_says_so_once_and_is_bound_once_released() {
    let tenancy = Tenancy::parse(
        r#"{"grants": [{"namespaces": ["ml"], "user": 1000, "group": 1000, "userIds": "1500-1599",
            "groupIds": "1500-1599"}]}"#,
        "test",
    )
    .expect("a tenancy document");
    let mut world = World::granted(tenancy).await;
    world.slurm.forget_user(1500);
    world.create("stranger", "1", json!({}), json!({"sunk.dev/user-id": "1500"}));
    world.settle().await;

    assert_eq!(world.scheduled("stranger"), Some(("False".into(), "SlurmHeld".into())));
    let said = message(&world, "stranger");
    for part in ["JobHeldAdmin", "slurm_cred_create failure", "uid 1500", "userIds 1500-1599", "tenancy grants[0]"] {
        assert!(said.contains(part), "{part}: {said}");
    }
    let warnings = |world: &World| {
        world.api.writes().iter().filter(|write| *write == &format!("event {NAMESPACE}/stranger SlurmJobHeld")).count()
    };
    assert_eq!(warnings(&world), 1);
    world.recheck().await;
    assert_eq!(warnings(&world), 1, "not told again when looked at again");

    let job = world.job_of("stranger").expect("the held job is kept");
    world.slurm.add_user(1500);
    world.slurm.release(&job.target());
    world.settle().await;
    assert!(world.node_of("stranger").is_some(), "{:?}", world.scheduled("stranger"));
    assert_eq!(world.job_of("stranger").map(|job| job.job_id), Some(job.job_id), "the same job");
}

fn ml_granted_1000() -> Tenancy {
    Tenancy::parse(r#"{"grants": [{"namespaces": ["ml"], "user": 1000, "group": 1000}]}"#, "test")
        .expect("a tenancy document")
}

/// As the chart installs the host: a granted pod is allocated at once, as its grant's user, and the
/// administrator's link is written over the sealed one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_pod_is_allocated_at_once_as_its_user_and_linked() {
    let mut world = World::fast(ml_granted_1000()).await;
    world.create("a", "1", json!({}), json!({}));
    world.settle().await;

    assert!(world.node_of("a").is_some(), "{:?}", world.scheduled("a"));
    let job = world.job_of("a").expect("the pod's allocation, linked by the administrator");
    assert!(!job.batch_flag, "an allocation, not a queued batch job: {job:?}");
    assert_eq!((job.user_id, job.group_id), (Some(1000), Some(1000)));
    assert_eq!(world.slurm.all_jobs().len(), 1);
}

/// slurmrestd restarting mid-allocation: slurmctld cannot deliver the answer and kills the job it
/// granted (FAILED, on the node it gave). That job never served the pod: the pod is allocated
/// again, not told its job "failed before it ran".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allocation_killed_because_its_answer_was_lost_is_made_again() {
    let mut world = World::fast(ml_granted_1000()).await;
    world.slurm.lose_next_allocation();
    world.create("a", "1", json!({}), json!({}));
    world.settle().await;

    assert!(world.node_of("a").is_some(), "{:?}: {}", world.scheduled("a"), message(&world, "a"));
    let jobs = world.slurm.all_jobs();
    let killed: Vec<_> = jobs.iter().filter(|job| job.job_state == ["FAILED"]).collect();
    assert_eq!(killed.len(), 1, "{jobs:?}");
    assert!(!killed[0].nodes.is_empty(), "killed after it was given a node: {killed:?}");
    let live = world.slurm.live_jobs();
    assert_eq!(live.len(), 1, "one job serves the pod: {live:?}");
    assert_eq!(world.job_of("a").map(|job| job.job_id), Some(live[0].job_id));
}

/// slurmrestd restarting just after a tenant's allocation: the host binds the pod, but cannot write
/// the administrator's link yet, nor list jobs. The next pass writes the link the job's seal names,
/// never the empty one of the job as the fast path recorded it, so the job keeps its pod and the pod
/// its job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allocation_whose_link_could_not_be_written_at_once_is_linked_by_the_next_pass() {
    let mut world = World::fast(ml_granted_1000()).await;
    world.slurm.reset_next_job_update();
    world.create("a", "1", json!({}), json!({}));
    world.settle().await;
    world.slurm.answer_job_listings_again();
    world.settle().await;

    assert!(world.pod("a").is_some(), "the pod was deleted");
    assert!(world.node_of("a").is_some(), "{:?}: {}", world.scheduled("a"), message(&world, "a"));
    let live = world.slurm.live_jobs();
    assert_eq!(live.len(), 1, "{live:?}");
    assert!(live[0].admin_comment.contains("uid-a"), "the administrator's link: {:?}", live[0]);
    assert!(!live[0].comment.contains("seal="), "the seal gone: {:?}", live[0]);
}
