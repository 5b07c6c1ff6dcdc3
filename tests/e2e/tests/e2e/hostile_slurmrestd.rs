//! A host whose slurmrestd answers garbage (through a hostile proxy): HTML, truncated JSON, a 500, a
//! 200 with only errors, a 100 MB body, a trickle, a reset. It fails closed: a pod that arrives waits
//! `SlurmUnreachable` with no job, the pod already running keeps its job, its node is not drained,
//! the NodeSet's slurmd pod stays; nothing panics; and once answers are sane the waiting pod is bound.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::api::ListParams;
use sunk::slurm::JobState;
use sunk_e2e::{
    Answer, Cluster, HostileProxy, NodeGuard, create_nodeset, node_name, pod, scheduled_condition, slurm_node,
    slurmrestd_address, wait_for, wait_launched,
};

const NODES: [&str; 2] = ["kube-node-4", "kube-node-5"];
const POOL: &str = "sunk.dev/e2e-pool";
const REGISTER: Duration = Duration::from_secs(90);
const BIND: Duration = Duration::from_secs(60);
/// A trickle holds a listing until the client's 30 s timeout: the host may only notice then.
const NOTICE: Duration = Duration::from_secs(50);

#[tokio::test]
async fn a_hostile_slurmrestd_ends_nothing_and_the_host_recovers_once_answers_are_sane() -> anyhow::Result<()> {
    let proxy = HostileProxy::start(&slurmrestd_address()).await?;
    let mut cluster = Cluster::connect("hostile").await?;
    cluster.create_slurm_key_secret("slurm-key").await?;
    // Two Slurm nodes of one CPU: one for the pod that runs throughout, one for each pod that waits
    // out an answer. (This host believes only its own NodeSet's slurmd pods, not the cluster's.)
    let nodes = NodeGuard::new(&NODES);
    let namespace = cluster.namespace.clone();
    for node in NODES {
        nodes.label(node, (POOL, &namespace))?;
    }
    cluster.start_host_via(
        proxy.url(),
        &[
            ("SUNK_NODESET_CONTROLLER", "true"),
            ("SUNK_SYNCER", "true"),
            ("SUNK_NODESET_NAMESPACE", &namespace),
            ("SUNK_SLURMCTLD_ADDRESS", "slurmctld.slurm.svc.cluster.local:6817"),
        ],
    )?;
    create_nodeset(&cluster, "hostile", (POOL, &namespace), serde_json::json!({})).await?;
    for node in NODES {
        wait_for(&format!("{node} to register IDLE"), REGISTER, || async {
            let slurm = slurm_node(&cluster, node).await.ok()??;
            (slurm.state.first().map(String::as_str) == Some("IDLE") && slurm.comment.contains(&namespace))
                .then_some(())
        })
        .await?;
    }
    let slurmd = slurmd_pods(&cluster).await?;
    assert_eq!(slurmd.len(), 2, "a slurmd pod on each node: {slurmd:?}");

    cluster.create_pod(pod("running", "1", "256Mi")).await?;
    let running = cluster.wait_pod("running", "a first pod bound", BIND, |pod| node_name(pod).is_some()).await?;
    let running_uid = running.metadata.uid.clone().unwrap_or_default();

    for answer in Answer::HOSTILE {
        proxy.answer(answer);
        wait_for(&format!("the host to find Slurm unreadable ({answer:?})"), NOTICE, || async {
            cluster.metrics(0).await.ok()?.lines().any(|line| line == "sunk_slurm_up 0").then_some(())
        })
        .await?;
        let name = format!("during-{answer:?}").to_lowercase();
        cluster.create_pod(pod(&name, "1", "256Mi")).await?;
        let waiting = cluster
            .wait_pod(&name, &format!("{name}: PodScheduled=False, SlurmUnreachable"), NOTICE, |pod| {
                scheduled_condition(pod)
                    .is_some_and(|(status, reason, _)| status == "False" && reason == "SlurmUnreachable")
            })
            .await?;
        let waiting_uid = waiting.metadata.uid.unwrap_or_default();
        assert!(
            cluster.jobs_of(&waiting_uid).await?.is_empty(),
            "{answer:?}: no job for {name} while Slurm is unreadable"
        );

        // Nothing that runs was touched.
        assert_eq!(cluster.host_exited(0), None, "{answer:?}: the host is still running");
        let running = cluster.pods().get("running").await?;
        assert!(
            running.metadata.deletion_timestamp.is_none() && node_name(&running).is_some(),
            "{answer:?}: the running pod stays"
        );
        let jobs = cluster.jobs_of(&running_uid).await?;
        assert!(
            jobs.iter().all(|job| job.state() == JobState::Running) && jobs.len() == 1,
            "{answer:?}: its job runs: {jobs:?}"
        );
        for node in NODES {
            let slurm = slurm_node(&cluster, node).await?.expect("the NodeSet's Slurm node");
            let drained = slurm.state.iter().any(|flag| flag == "DRAIN");
            assert!(!drained, "{answer:?}: {node} was drained: {:?} {}", slurm.state, slurm.reason);
        }
        assert_eq!(slurmd_pods(&cluster).await?, slurmd, "{answer:?}: the slurmd pods stay");

        proxy.answer(Answer::Forward);
        let sane = Instant::now();
        cluster
            .wait_pod(&name, &format!("{name} bound once answers are sane"), BIND, |pod| node_name(pod).is_some())
            .await?;
        eprintln!(
            "{answer:?}: {} requests answered so; bound {:.1} s after answers were sane",
            proxy.served(answer),
            sane.elapsed().as_secs_f64()
        );
        let jobs = cluster.jobs_of(&waiting_uid).await?;
        assert_eq!(jobs.len(), 1, "{answer:?}: one job for {name}");
        wait_launched(&jobs[0].target()).await?;
        cluster.delete_pod(&name).await?;
        // Its CPU is free again once Slurm has finished with the job (COMPLETING holds it).
        wait_for(&format!("{name}'s job to be over"), BIND, || async {
            let jobs = cluster.jobs_of(&waiting_uid).await.ok()?;
            let over = |job: &sunk::slurm::Job| {
                job.state() == JobState::Ended && !job.job_state.iter().any(|f| f == "COMPLETING")
            };
            jobs.iter().all(over).then_some(())
        })
        .await?;
    }
    let log = std::fs::read_to_string(cluster.host_log())?;
    assert!(!log.contains("panicked"), "the host panicked");
    Ok(())
}

/// The UIDs of this test's slurmd pods that are not being deleted, by Node.
async fn slurmd_pods(cluster: &Cluster) -> anyhow::Result<BTreeMap<String, String>> {
    let pods = cluster.pods().list(&ListParams::default().labels(sunk::scheduler::SLURM_NODE_LABEL)).await?;
    Ok(pods
        .items
        .iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .filter_map(|pod| Some((node_name(pod)?.to_string(), pod.metadata.uid.clone()?)))
        .collect())
}
