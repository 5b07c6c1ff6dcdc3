//! `--against <scheduler>`: one pod at a time through a scheduler already installed on the cluster
//! (the chart's host after `scripts/demo.sh`, with its values), beside kube-scheduler, on whatever
//! Nodes have room. Each pod is deleted once bound, and the next created only when its Slurm job is
//! gone, so every pod finds the room the first one found.

use std::time::Duration;

use kube::Client;
use kube::api::{Api, DeleteParams};
use sunk_e2e::{in_slurm_root, wait_for};

use super::measure::{Bindings, bench_pod_anywhere, create_and_bind};
use super::stats::{Summary, millis};

pub async fn one_at_a_time(
    kube: &Client,
    namespace: &str,
    bindings: &Bindings,
    scheduler: &str,
    label: &str,
    count: usize,
) -> anyhow::Result<Summary> {
    let api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(kube.clone(), namespace);
    let mut trips = Vec::with_capacity(count);
    for index in 0..count {
        let name = format!("{label}-{index}");
        trips.push(create_and_bind(&api, bindings, bench_pod_anywhere(&name, scheduler, namespace)?).await?);
        api.delete(&name, &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await?;
        let job = format!("{namespace}/{name}");
        wait_for(&format!("{name} and its Slurm job to be gone"), Duration::from_secs(60), || async {
            let gone = api.get_opt(&name).await.ok()?.is_none();
            let jobs = in_slurm_root(&["squeue", "-h", "-n", &job, "-t", "R,CG,CF,PD"]).ok()?;
            (gone && jobs.trim().is_empty()).then_some(())
        })
        .await?;
    }
    let summary = Summary::of(&trips);
    println!("{label}: {count} pods one at a time, p50 {}, p99 {}", millis(summary.p50), millis(summary.p99));
    Ok(summary)
}
