use super::*;

fn job(id: u32, uid: &str, state: &str) -> Job {
    let pod = PodKey { namespace: "ns".into(), name: format!("pod-{uid}"), uid: uid.into() };
    Job { job_id: id, admin_comment: pod.link().into(), job_state: vec![state.into()], ..Default::default() }
}

#[test]
fn another_installations_placeholders_are_not_ours_nor_candidates() {
    let cache = JobCache::default();
    let on_n1 = |job: Job| Job { nodes: "n1".into(), ..job };
    let signed = |job: Job, by: &Installation| {
        on_n1(Job { admin_comment: by.sign(job.admin_comment.to_string()).into(), ..job })
    };
    let ours = signed(job(1, "a", "RUNNING"), &Installation::new("sunk", "test-cluster"));
    let other_cluster = signed(job(2, "b", "RUNNING"), &Installation::new("sunk", "another-cluster"));
    let other_release = signed(job(3, "c", "RUNNING"), &Installation::new("sunk-gpu", "test-cluster"));
    let legacy = on_n1(job(4, "d", "RUNNING"));
    let slurm_users = on_n1(Job { job_id: 5, job_state: vec!["RUNNING".into()], ..Default::default() });
    cache.replace(vec![ours, other_cluster, other_release, legacy, slurm_users], 100, Instant::now());
    assert_eq!(cache.for_pod("a").len(), 1);
    assert!(cache.for_pod("b").is_empty() && cache.for_pod("c").is_empty());
    assert_eq!(cache.for_pod("d").len(), 1, "a link from before installations were named is still ours");
    let mut candidates: Vec<u32> = cache.holding().iter().map(|job| job.job_id).collect();
    candidates.sort_unstable();
    assert_eq!(candidates, [1, 4, 5], "another installation's jobs are not even preemption candidates");
}

#[test]
fn a_pod_with_one_placeholder_holds_room_for_one() {
    let cache = JobCache::default();
    let pod = PodKey { namespace: "ns".into(), name: "pod-c".into(), uid: "c".into() };
    cache.record_submitted(pod, 7, &JobDescription::default());
    cache.replace(vec![job(1, "a", "PENDING"), job(2, "b", "RUNNING")], 100, Instant::now() - Duration::from_secs(1));
    let state = cache.read();
    assert_eq!(state.by_pod.len(), 3);
    assert!(state.by_pod.values().all(|placeholders| placeholders.capacity() == 1));
}

#[test]
fn keeps_a_fresh_submission_that_the_listing_missed() {
    let cache = JobCache::default();
    let began = Instant::now();
    let pod = PodKey { namespace: "ns".into(), name: "pod-a".into(), uid: "a".into() };
    cache.record_submitted(pod, 7, &JobDescription::default());
    cache.replace(vec![job(3, "b", "RUNNING")], 100, began);
    assert_eq!(cache.for_pod("a")[0].job.job_id, 7);
    // A listing that began after the submission is the truth.
    cache.replace(vec![job(3, "b", "RUNNING")], 101, Instant::now());
    assert!(cache.for_pod("a").is_empty());
}

#[test]
fn a_pod_is_quiet_only_for_a_moment_after_its_job_was_queued_here() {
    let cache = JobCache::default();
    let pod = |uid: &str| PodKey { namespace: "ns".into(), name: format!("pod-{uid}"), uid: uid.into() };
    cache.record_job(pod("queued"), job(1, "queued", "PENDING"));
    cache.record_job(pod("allocated"), job(2, "allocated", "RUNNING"));
    let moment = Duration::from_secs(60);
    assert!(cache.quiet_for("queued", moment).is_some());
    assert!(cache.quiet_for("allocated", moment).is_none(), "a job that runs at once was never queued");
    assert!(cache.quiet_for("queued", Duration::ZERO).is_none(), "the moment is over");
}

#[test]
fn a_job_listed_before_its_answer_arrived_stays_one_placeholder() {
    let cache = JobCache::default();
    cache.replace(vec![job(9, "a", "RUNNING")], 100, Instant::now());
    let pod = PodKey { namespace: "ns".into(), name: "pod-a".into(), uid: "a".into() };
    cache.record_job(pod, job(9, "a", "RUNNING"));
    let placeholders = cache.for_pod("a");
    assert_eq!(placeholders.len(), 1, "{placeholders:?}");
    assert_eq!(placeholders[0].job.job_id, 9);
}

#[test]
fn an_array_task_is_one_placeholder_pending_with_its_siblings_and_running_alone() {
    use crate::scheduler::link::ArrayLink;
    use crate::slurm::NoValue;
    let pods: Vec<PodKey> = ["a", "b"]
        .iter()
        .map(|uid| PodKey { namespace: "ns".into(), name: format!("pod-{uid}"), uid: (*uid).into() })
        .collect();
    let link = ArrayLink { namespace: "ns".into(), members: pods.clone() }.render();
    let cache = JobCache::default();
    // As the submit path records task 0 before any listing.
    let pending = Job {
        job_id: 50,
        admin_comment: link.into(),
        job_state: vec!["PENDING".into()],
        array_job_id: NoValue::of(50),
        ..Default::default()
    };
    let submitted = Job { array_task_id: NoValue::of(0), ..pending.clone() };
    cache.record_job(pods[0].clone(), submitted.clone());
    let began = Instant::now();
    // Task 0 started as job 51; task 1 still pends in the array's record.
    let running = Job { job_id: 51, job_state: vec!["RUNNING".into()], nodes: "n1".into(), ..submitted };
    let pending = Job { array_task_string: "1".into(), ..pending };
    cache.replace(vec![running, pending], 3, began - Duration::from_secs(1));
    let a = cache.for_pod("a");
    assert_eq!(a.len(), 1, "never a duplicate of itself: {a:?}");
    assert_eq!((a[0].job.job_id, a[0].job.state()), (51, JobState::Running));
    let b = cache.for_pod("b");
    assert_eq!((b.len(), b[0].job.target(), b[0].job.state()), (1, "50_1".to_string(), JobState::Pending));
    cache.record_cancelled("50_1", None);
    assert_eq!(cache.for_pod("b")[0].job.state(), JobState::Ended);
    assert_eq!(cache.for_pod("a")[0].job.state(), JobState::Running, "a sibling's cancel is not this task's");
}

#[test]
fn a_listing_without_answer_or_failing_makes_slurm_unreachable() {
    let cache = JobCache::default();
    assert_eq!(cache.unreachable(Duration::ZERO), None);
    cache.write().listing_since = Some(Instant::now() - Duration::from_secs(12));
    assert_eq!(cache.unreachable(Duration::from_secs(60)), None);
    let why = cache.unreachable(Duration::from_secs(10)).unwrap();
    assert!(why.contains("not answered for 12s"), "{why}");
    cache.write().last_error = Some("cannot reach slurmrestd: connection refused".into());
    assert!(cache.unreachable(Duration::from_secs(60)).unwrap().contains("connection refused"));
}

#[test]
fn a_cancelled_job_reads_as_over_with_its_new_comment_until_listed() {
    let cache = JobCache::default();
    cache.replace(vec![job(4, "a", "RUNNING")], 1, Instant::now());
    cache.record_cancelled("4", Some("marked"));
    let known = &cache.for_pod("a")[0].job;
    assert_eq!((known.state(), known.admin_comment.as_str()), (JobState::Ended, "marked"));
}

#[test]
fn a_listing_that_began_before_a_cancellation_does_not_bring_the_job_back() {
    // Otherwise a job replaced (marked, cancelled) while a listing was in flight comes back RUNNING
    // with that listing, beside its successor, and the successor is cancelled as the duplicate.
    let cache = JobCache::default();
    let on_n4 = |job: Job| Job { nodes: "n4".into(), ..job };
    cache.replace(vec![on_n4(job(56, "a", "RUNNING"))], 1, Instant::now());
    let began = Instant::now();
    cache.record_cancelled("56", Some("marked"));
    let pod = PodKey { namespace: "ns".into(), name: "pod-a".into(), uid: "a".into() };
    cache.record_submitted(pod, 57, &JobDescription::default());
    cache.replace(vec![on_n4(job(56, "a", "RUNNING"))], 2, began);
    let states: Vec<_> = cache.for_pod("a").iter().map(|p| (p.job.job_id, p.job.state())).collect();
    assert_eq!(states, [(56, JobState::Ended), (57, JobState::Pending)]);
    assert_eq!(cache.for_pod("a")[0].job.admin_comment, "marked");
    assert!(cache.holding().iter().all(|job| job.job_id != 56 || job.state() == JobState::Ended));
    // A listing that began after the cancellation is the truth.
    cache.replace(vec![on_n4(job(56, "a", "COMPLETED"))], 3, Instant::now());
    assert_eq!(cache.for_pod("a")[0].job.admin_comment, job(56, "a", "RUNNING").admin_comment);
}

#[test]
fn a_replaced_mark_slurm_could_not_keep_outlives_the_listings_that_follow() {
    let cache = JobCache::default();
    cache.replace(vec![job(7, "a", "PENDING"), job(8, "b", "PENDING")], 1, Instant::now());
    cache.record_replaced("7", "replaced", false);
    cache.record_replaced("8", "replaced", true);
    let listed = Instant::now();
    cache.replace(vec![job(7, "a", "CANCELLED"), job(8, "b", "CANCELLED")], 2, listed);
    assert_eq!(cache.for_pod("a")[0].job.admin_comment, "replaced", "kept here: Slurm has no mark");
    assert_eq!(cache.for_pod("b")[0].job.admin_comment, job(8, "b", "CANCELLED").admin_comment, "Slurm's");
    cache.replace(vec![job(7, "a", "CANCELLED")], 3, Instant::now());
    assert_eq!(cache.for_pod("a")[0].job.admin_comment, "replaced");
}

#[test]
fn a_pod_whose_job_this_host_cancelled_is_woken_by_the_next_listing_even_if_it_shows_the_same() {
    let cache = JobCache::default();
    let mut gang = job(4, "a", "RUNNING");
    gang.admin_comment = "sunk.dev/gang=ns/g/pod-a:a,pod-b:b".into();
    cache.replace(vec![gang.clone()], 1, Instant::now());
    cache.record_cancelled("4", None);
    // Slurm lists it CANCELLED, exactly as recorded: both members must still look again.
    let cancelled = Job { job_state: vec!["CANCELLED".into()], ..gang };
    let mut woken: Vec<String> =
        cache.replace(vec![cancelled.clone()], 2, Instant::now()).into_iter().map(|p| p.uid).collect();
    woken.sort();
    assert_eq!(woken, ["a", "b"]);
    assert!(cache.replace(vec![cancelled], 3, Instant::now()).is_empty(), "once is enough");
}

#[test]
fn a_pod_whose_task_a_cut_list_may_hide_is_in_doubt_until_a_listing_shows_it() {
    use crate::scheduler::link::ArrayLink;
    use crate::slurm::NoValue;
    let pods: Vec<PodKey> = (0..5)
        .map(|task| PodKey { namespace: "ns".into(), name: format!("pod-{task}"), uid: format!("u{task}") })
        .collect();
    let record = |tasks: &str| Job {
        job_id: 60,
        admin_comment: ArrayLink { namespace: "ns".into(), members: pods.clone() }.render().into(),
        job_state: vec!["PENDING".into()],
        array_job_id: NoValue::of(60),
        array_task_string: tasks.into(),
        ..Default::default()
    };
    let cache = JobCache::default();
    // Task 1 runs on its own; libslurm cut the pending record's list after task 2.
    let running = Job { job_id: 61, array_task_id: NoValue::of(1), job_state: vec!["RUNNING".into()], ..record("") };
    cache.replace(vec![running.clone(), record("0,2,4...")], 1, Instant::now());
    assert_eq!(cache.for_pod("u0")[0].job.target(), "60_0");
    assert_eq!(cache.for_pod("u2")[0].job.target(), "60_2");
    assert_eq!(cache.for_pod("u1")[0].job.state(), JobState::Running);
    let in_doubt: Vec<bool> = (0..5).map(|task| cache.in_doubt(&format!("u{task}"))).collect();
    assert_eq!(in_doubt, [false, false, false, true, true], "tasks 3 and 4 may pend past the cut");
    // Listed in full: task 3 ended meanwhile, task 4 still pends.
    cache.replace(vec![running, record("0,2,4")], 2, Instant::now());
    assert!(!cache.in_doubt("u3") && cache.for_pod("u3").is_empty(), "a pod with no job may have one again");
    assert_eq!(cache.for_pod("u4")[0].job.target(), "60_4");
}

#[test]
fn a_lost_submission_is_in_doubt_until_a_later_listing() {
    let cache = JobCache::default();
    let before = Instant::now();
    cache.record_in_doubt("a");
    assert!(cache.in_doubt("a"));
    cache.replace(vec![], 1, before);
    assert!(cache.in_doubt("a"), "a listing that began before the submission proves nothing");
    cache.replace(vec![], 2, Instant::now());
    assert!(!cache.in_doubt("a"));
}

#[test]
fn reports_pods_whose_jobs_changed_and_ignores_foreign_jobs() {
    let cache = JobCache::default();
    let mut foreign = job(9, "x", "RUNNING");
    foreign.admin_comment = SharedText::default();
    let changed = cache.replace(vec![job(1, "a", "PENDING"), foreign.clone()], 5, Instant::now());
    assert_eq!(changed.len(), 1);
    assert!(cache.is_listed());
    let changed = cache.replace(vec![job(1, "a", "PENDING"), foreign], 6, Instant::now());
    assert!(changed.is_empty());
    let changed = cache.replace(vec![job(1, "a", "RUNNING")], 7, Instant::now());
    assert_eq!(changed[0].uid, "a");
    let changed = cache.replace(vec![], 8, Instant::now());
    assert_eq!(changed[0].uid, "a");
    assert_eq!(cache.read().last_update, Some(8));
}

/// A fake Slurm of one node with one CPU, and a placeholder submitted for each of `count` pods: the
/// first runs, the others wait.
async fn one_cpu_with_pods(count: usize) -> (crate::slurm::FakeSlurm, Vec<PodKey>) {
    let slurm = crate::slurm::FakeSlurm::with_nodes("n", 1, 1);
    let pods: Vec<PodKey> = (0..count)
        .map(|n| PodKey { namespace: "ns".into(), name: format!("pod-{n}"), uid: format!("uid-{n}") })
        .collect();
    for pod in &pods {
        let job = JobDescription { name: pod.name.clone(), admin_comment: Some(pod.link()), ..Default::default() };
        slurm.submit(&job).await.expect("submitted");
    }
    (slurm, pods)
}

#[tokio::test]
async fn at_scale_a_poll_lists_the_jobs_only_when_a_state_moved() {
    let (slurm, pods) = one_cpu_with_pods(3).await;
    let cache = JobCache::default().with_states_first_from(pods.len());
    let polls = |jobs, states| (slurm.listings("jobs"), slurm.listings("job states")) == (jobs, states);

    assert_eq!(cache.refresh(&slurm).await.expect("listed").len(), pods.len(), "the first poll lists them all");
    cache.refresh(&slurm).await.expect("listed");
    assert!(polls(2, 1), "at scale the states come first; with none to compare, the listing follows");
    assert!(cache.refresh(&slurm).await.expect("polled").is_empty());
    assert!(polls(2, 2), "no state moved: the listing stands");

    let running = cache.live_where(|p| p.job.state() == JobState::Running);
    let [first] = running.as_slice() else { panic!("one job runs on the one CPU: {running:?}") };
    slurm.finish(&first.job.job_id.to_string(), "COMPLETED");
    let woken = cache.refresh(&slurm).await.expect("listed");
    assert!(polls(3, 3), "a job ended: the states moved, and the jobs are listed");
    assert!(woken.contains(&first.pod), "the ended job's pod is woken: {woken:?}");

    let pending = cache.for_pod(&pods[pods.len() - 1].uid);
    cache.record_cancelled(&pending[0].job.target(), None);
    cache.refresh(&slurm).await.expect("listed");
    assert!(polls(4, 3), "a placeholder this host cancelled wakes its pod at the next full listing");

    slurm.set_reachable(false);
    cache.refresh(&slurm).await.expect_err("unreachable");
    assert!(cache.unreachable(Duration::from_secs(5)).is_some(), "unreadable states make Slurm unreachable");
}

#[tokio::test]
async fn at_scale_a_placeholder_the_states_show_started_is_read_alone_before_the_listing() {
    let (slurm, pods) = one_cpu_with_pods(2).await;
    let cache = JobCache::default().with_states_first_from(pods.len());
    cache.refresh(&slurm).await.expect("listed");
    cache.refresh(&slurm).await.expect("listed with the states before it");
    let [running] = cache.live_where(|p| p.job.state() == JobState::Running).try_into().expect("one runs");
    let waiting = pods.iter().find(|pod| **pod != running.pod).expect("one waits").clone();

    slurm.cut_off_job_listings();
    slurm.finish(&running.job.job_id.to_string(), "COMPLETED");
    let mut woken = Vec::new();
    let listed = cache.refresh_waking(&slurm, &mut |pods| woken.extend(pods)).await;
    assert!(listed.is_err(), "the full listing is still in flight");
    assert_eq!(woken, std::slice::from_ref(&waiting), "the started placeholder's pod is woken before the listing");
    let started = cache.for_pod(&waiting.uid);
    assert_eq!(started.iter().map(|p| p.job.state()).collect::<Vec<_>>(), [JobState::Running], "{started:?}");
    assert!(!started[0].job.nodes.is_empty(), "read with its node: {started:?}");

    slurm.answer_job_listings_again();
    let changed = cache.refresh(&slurm).await.expect("listed");
    assert_eq!(cache.for_pod(&waiting.uid)[0].job.state(), JobState::Running, "the listing agrees");
    assert!(!changed.contains(&waiting), "a pod read alone is not woken again for the same job: {changed:?}");
}

#[tokio::test]
async fn a_queued_job_no_listing_showed_is_read_alone_once_after_it_settled() {
    use crate::slurm::FakeSlurm;
    let slurm = FakeSlurm::with_nodes("n", 1, 1);
    let cache = JobCache::default();
    cache.refresh(&slurm).await.expect("listed");
    let pod = PodKey { namespace: "ns".into(), name: "pod-a".into(), uid: "a".into() };
    let description = JobDescription { admin_comment: Some(pod.link()), ..Default::default() };
    let job_id = slurm.submit(&description).await.expect("submitted");
    cache.record_submitted(pod.clone(), job_id, &description);

    assert_eq!(cache.unlisted_queued("a", Duration::from_secs(60)), None, "not before it had a moment to start");
    assert_eq!(cache.unlisted_queued("b", Duration::ZERO), None, "another pod's");
    assert_eq!(cache.unlisted_queued("a", Duration::ZERO), Some(job_id.to_string()));
    assert_eq!(cache.read_alone(&slurm, job_id.to_string()).await.expect("read"), std::slice::from_ref(&pod));
    let read = cache.for_pod("a");
    assert_eq!(read.len(), 1, "the job read is the one submitted: {read:?}");
    assert_eq!((read[0].job.state(), read[0].job.nodes.as_str()), (JobState::Running, "n-1"));
    assert_eq!(cache.unlisted_queued("a", Duration::ZERO), None, "read once, never once per pass");

    let other = PodKey { namespace: "ns".into(), name: "pod-b".into(), uid: "b".into() };
    let description = JobDescription { admin_comment: Some(other.link()), ..Default::default() };
    let waits = slurm.submit(&description).await.expect("submitted");
    cache.record_submitted(other, waits, &description);
    assert_eq!(cache.unlisted_queued("b", Duration::ZERO), Some(waits.to_string()));
    assert!(
        cache.read_alone(&slurm, waits.to_string()).await.expect("read").is_empty(),
        "still pending: nothing to wake"
    );
    assert_eq!(cache.for_pod("b")[0].job.state(), JobState::Pending);
    cache.refresh(&slurm).await.expect("listed");
    assert_eq!(cache.unlisted_queued("b", Duration::ZERO), None, "a listing shows it now");
    assert!(cache.read().read_alone.is_empty(), "forgotten once listed");
}

#[tokio::test]
async fn one_read_of_an_array_answers_for_every_task_that_started() {
    let slurm = crate::slurm::FakeSlurm::with_nodes("n", 2, 1);
    let cache = JobCache::default();
    cache.refresh(&slurm).await.expect("listed");
    let pods: Vec<PodKey> =
        (0..3).map(|n| PodKey { namespace: "ns".into(), name: format!("pod-{n}"), uid: format!("uid-{n}") }).collect();
    let members: Vec<(PodKey, JobDescription)> =
        pods.iter().map(|pod| (pod.clone(), JobDescription::default())).collect();
    let description = crate::scheduler::batch::array_description(&members, &cache.installation).expect("an array");
    let array = slurm.submit(&description).await.expect("submitted");
    for (task, pod) in pods.iter().enumerate() {
        let job = Job {
            job_id: array,
            job_state: vec!["PENDING".into()],
            admin_comment: description.admin_comment.clone().unwrap_or_default().into(),
            array_job_id: crate::slurm::NoValue::of(array.into()),
            array_task_id: crate::slurm::NoValue::of(task as u64),
            ..Default::default()
        };
        cache.record_job(pod.clone(), job);
    }

    let first = cache.unlisted_queued("uid-0", Duration::ZERO).expect("task 0 is read");
    assert_eq!(first, format!("{array}_0"));
    assert_eq!(cache.unlisted_queued("uid-1", Duration::ZERO), None, "one read for the whole array");
    let mut woken = cache.read_alone(&slurm, first).await.expect("read");
    woken.sort_by(|a, b| a.uid.cmp(&b.uid));
    assert_eq!(woken, pods[..2], "the two tasks that run on the two CPUs, whoever read them");
    let states: Vec<JobState> = pods.iter().map(|pod| cache.for_pod(&pod.uid)[0].job.state()).collect();
    assert_eq!(states, [JobState::Running, JobState::Running, JobState::Pending]);
}

#[test]
fn a_tenants_allocation_is_adopted_by_its_seal_only_as_the_sealed_uid() {
    let ours = Installation::new("sunk", "test-cluster").sealing_with(b"jwt key");
    let cache = JobCache::new(ours.clone());
    let sealed = |id: u32, uid: &str, runs_as: u32| {
        let link = ours.sign(job(id, uid, "RUNNING").admin_comment.to_string());
        let comment = ours.seal().seal(&link, 1000).expect("keyed");
        Job { admin_comment: "".into(), comment, user_id: Some(runs_as), ..job(id, uid, "RUNNING") }
    };
    let unresolved = sealed(2, "b", 99);
    let forged = Job { comment: sealed(3, "c", 1000).comment.replace("pod-c/c", "pod-d/d"), ..job(3, "d", "RUNNING") };
    let forged = Job { admin_comment: "".into(), user_id: Some(1000), ..forged };
    cache.replace(vec![sealed(1, "a", 1000), unresolved, forged], 100, Instant::now());
    let adopted = cache.for_pod("a");
    assert_eq!(adopted.len(), 1, "adopted by its seal: {adopted:?}");
    assert_eq!(PodKey::from_link(&adopted[0].job.admin_comment).map(|pod| pod.uid), Some("a".into()));
    assert!(cache.for_pod("b").is_empty(), "a job running as another uid (slurmctld's nobody) is not the pod's");
    assert!(cache.for_pod("c").is_empty() && cache.for_pod("d").is_empty(), "a seal edited to name another pod");
}
