use super::*;

fn of(cpus: u64, memory_mib: u64, gpus: u64) -> Resources {
    Resources { cpus, memory_mib, gpus }
}

fn job(job_id: u32, holds: Resources) -> HoldJob {
    HoldJob { job_id, holds, running: true }
}

#[test]
fn hold_jobs_come_and_go_with_what_the_pods_outside_slurm_need() {
    type Case = (&'static str, Resources, bool, Vec<HoldJob>, Option<HoldStep>);
    let nothing = of(0, 0, 0);
    // (what, needed, draining, hold jobs, step)
    let cases: Vec<Case> = vec![
        ("nothing outside Slurm", nothing, false, vec![], None),
        ("a pod outside Slurm appears", of(1, 64, 0), false, vec![], Some(HoldStep::Submit { more: of(1, 64, 0) })),
        ("held already", of(1, 64, 0), false, vec![job(7, of(1, 64, 0))], None),
        ("held with room to spare", of(1, 64, 0), false, vec![job(7, of(2, 128, 0))], None),
        (
            "a GPU more: a job for the difference, with the one CPU every job holds",
            of(1, 64, 1),
            false,
            vec![job(7, of(1, 64, 0))],
            Some(HoldStep::Submit { more: of(1, 0, 1) }),
        ),
        (
            "memory more, CPUs covered",
            of(1, 96, 0),
            false,
            vec![job(7, of(1, 64, 0))],
            Some(HoldStep::Submit { more: of(1, 32, 0) }),
        ),
        (
            "the pods left: every job goes, largest first",
            nothing,
            false,
            vec![job(7, of(1, 64, 0)), job(8, of(1, 0, 2))],
            Some(HoldStep::Cancel { job_id: 8 }),
        ),
        (
            "less needed: the job the others can spare goes",
            of(1, 64, 0),
            false,
            vec![job(7, of(1, 64, 0)), job(8, of(1, 0, 2))],
            Some(HoldStep::Cancel { job_id: 8 }),
        ),
        (
            "no job can go without the rest falling short",
            of(2, 64, 2),
            false,
            vec![job(7, of(1, 64, 0)), job(8, of(1, 0, 2))],
            None,
        ),
        (
            "a draining node needs none",
            of(1, 64, 0),
            true,
            vec![job(7, of(1, 64, 0))],
            Some(HoldStep::Cancel { job_id: 7 }),
        ),
        ("a draining node gets none", of(1, 64, 0), true, vec![], None),
    ];
    for (what, needed, draining, held, step) in cases {
        assert_eq!(plan(needed, draining, &held), step, "{what}");
    }
}

#[test]
fn a_step_once_taken_leaves_nothing_to_do() {
    // Whatever the need and the jobs, submitting what is asked, or cancelling what is offered,
    // reaches a state with no further step within a few steps: no job is submitted and cancelled
    // by turns.
    let needs = [of(0, 0, 0), of(1, 1, 0), of(3, 100, 2), of(1, 0, 1), of(2, 2048, 0)];
    let starts = [vec![], vec![job(1, of(1, 1, 0))], vec![job(1, of(4, 4096, 4)), job(2, of(1, 1, 1))]];
    for needed in needs {
        for start in &starts {
            let mut held = start.clone();
            let mut next_id = 100;
            let mut steps = 0;
            while let Some(step) = plan(needed, false, &held) {
                steps += 1;
                assert!(steps <= 4, "{needed:?} from {start:?}: still stepping, at {held:?}");
                match step {
                    HoldStep::Submit { more } => {
                        next_id += 1;
                        held.push(job(next_id, more));
                    }
                    HoldStep::Cancel { job_id } => held.retain(|job| job.job_id != job_id),
                }
            }
            let sum = held.iter().fold(Resources::default(), |sum, job| sum.plus(job.holds));
            assert!(sum.covers(needed), "{needed:?} from {start:?}: {held:?}");
        }
    }
}

#[test]
fn a_hold_job_asks_for_its_node_alone_above_every_pod() {
    let description =
        job_description("slurm-1", "kube-1", "batch", of(1, 64, 2), PlaceholderKind::Batch, |link| link + ";by=me");
    assert_eq!(description.required_nodes, ["slurm-1"]);
    assert_eq!(description.partition.as_deref(), Some("batch"));
    assert_eq!(description.admin_comment.as_deref(), Some("sunk.dev/hold=slurm-1;by=me"));
    assert_eq!((description.cpus_per_task, description.memory_per_node.get()), (1, Some(64)));
    assert_eq!(description.tres_per_node.as_deref(), Some("gres/gpu:2"));
    assert_eq!(description.priority.and_then(|priority| priority.get()), Some(PRIORITY));
    let listed = slurm::Job {
        job_id: 9,
        admin_comment: "sunk.dev/hold=slurm-1;by=me".into(),
        cpus: NoValue::of(1),
        memory_per_node: NoValue::of(64),
        tres_per_node: "gres/gpu:2".into(),
        ..Default::default()
    };
    let placeholder = slurm::Job { job_id: 10, admin_comment: "sunk.dev/pod=ml/a/u1".into(), ..Default::default() };
    let listing = [listed, placeholder];
    let held = by_node(&listing);
    assert_eq!(held.get("slurm-1"), Some(&vec![HoldJob { running: false, ..job(9, of(1, 64, 2)) }]));
    assert_eq!(held.len(), 1);
}
