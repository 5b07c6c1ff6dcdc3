//! Everything that writes (the scheduler, the NodeSet controller, the Syncer, PolicyModule status),
//! run for one term of leadership on a runtime of its own: when the term ends, that runtime goes down
//! with every task the writers spawned, so nothing of the term writes any more, and the process
//! stands for election again with its shared caches (Slurm's nodes, the compiled policies) warm.
//!
//! Every write of a term goes through the fence (`leader::fence`): its Kubernetes client refuses
//! writes, and its Slurm refuses changes, once the leadership lost or was about to lose the Lease.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::oneshot;

use super::host_args::{HostArgs, conf_server, own_namespace};
use crate::delivery::{self, Loads};
use crate::leader::{Fence, FencedSlurm};
use crate::nodeset::{self, ClusterSettings};
use crate::policy::{self, Policies};
use crate::scheduler;
use crate::slurm::{NodeCache, Slurm, SlurmClient};
use crate::tenancy::Tenancy;

/// On SIGTERM, how long the controllers may take to finish the reconciles under way; and how long a
/// term's runtime may take to go down.
pub const DRAIN: Duration = Duration::from_secs(3);

/// What every term's writers are made from.
pub struct Writers {
    pub args: HostArgs,
    pub slurm: SlurmClient,
    pub slurm_nodes: Option<NodeCache>,
    pub policies: Arc<Policies>,
    pub tenancy: Arc<Tenancy>,
    /// What loading each PolicyModule came to (every replica loads them).
    pub loads: Loads,
    pub metrics: WriterMetrics,
    pub fence: Fence,
}

/// The series the writing controllers report to, registered before any of them starts (followers
/// serve them too, at zero), and kept from term to term.
#[derive(Clone, Default)]
pub struct WriterMetrics {
    pub passes: crate::kube::ReconcileMetrics,
    pub syncer: crate::syncer::SyncerMetrics,
    pub scheduler: scheduler::SchedulerMetrics,
    pub pool: crate::pool::PoolMetrics,
}

impl WriterMetrics {
    pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        self.passes.register(registry);
        self.syncer.register(registry);
        self.scheduler.register(registry);
        self.pool.register(registry);
    }
}

/// One term's writers, running.
pub struct Term {
    stop: oneshot::Sender<()>,
    done: oneshot::Receiver<anyhow::Result<()>>,
}

impl Writers {
    /// Starts the writers on a runtime of their own, on a thread of their own.
    pub fn start(&self) -> anyhow::Result<Term> {
        let (stop, stopped) = oneshot::channel::<()>();
        let (finished, done) = oneshot::channel();
        let writers = self.term();
        std::thread::Builder::new()
            .name("sunk-writers".into())
            .spawn(move || {
                let result = tokio::runtime::Builder::new_multi_thread()
                    .thread_name("sunk-writer")
                    .enable_all()
                    .build()
                    .context("starting the writers' runtime")
                    .and_then(|runtime| {
                        let result = runtime.block_on(async {
                            tokio::select! {
                                result = writers => result,
                                _ = stopped => Ok(()),
                            }
                        });
                        // Every task the writers spawned (sweeps, polls, batches) goes with the runtime.
                        runtime.shutdown_timeout(DRAIN);
                        result
                    });
                let _ = finished.send(result);
            })
            .context("starting the writers' thread")?;
        Ok(Term { stop, done })
    }

    /// The writers of one term: fresh clients behind the fence, the shared caches and policies.
    fn term(&self) -> BoxFuture<'static, anyhow::Result<()>> {
        let (args, slurm, slurm_nodes) = (self.args.clone(), self.slurm.clone(), self.slurm_nodes.clone());
        let (policies, metrics, fence) = (self.policies.clone(), self.metrics.clone(), self.fence.clone());
        let (tenancy, loads) = (self.tenancy.clone(), self.loads.clone());
        async move {
            // Clients made on this term's runtime, so that none of their connections outlives it.
            let client = crate::kube::connect_fenced(args.kubeconfig.as_deref(), fence.clone(), true).await?;
            let evictions = crate::kube::connect_fenced(args.kubeconfig.as_deref(), fence.clone(), false).await?;
            // Read once a term: a partition added later needs a new term (or a restart) before pods
            // may name it.
            let partitions = if args.scheduler { partitions(&slurm).await } else { Vec::new() };
            let slurm: Arc<dyn Slurm> = Arc::new(FencedSlurm::new(Arc::new(slurm), fence));
            let parts =
                Parts { args, client, evictions, slurm, slurm_nodes, policies, tenancy, loads, metrics, partitions };
            parts.run().await
        }
        .boxed()
    }
}

/// Slurm's partitions, asked again until slurmrestd answers: the scheduler checks pods against them
/// and cannot start without. (A slurmrestd whose slurmdbd is still starting answers 502 for a while.)
async fn partitions(slurm: &SlurmClient) -> Vec<String> {
    let mut pause = Duration::from_millis(500);
    loop {
        match slurm.partitions().await {
            Ok(partitions) => return partitions,
            Err(error) => {
                tracing::warn!(%error, "listing Slurm partitions failed; the scheduler starts once it succeeds");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(10));
            }
        }
    }
}

impl Term {
    /// Resolves when the writers end on their own: an error, or a stop signal they obeyed.
    pub async fn finished(&mut self) -> anyhow::Result<()> {
        outcome(&mut self.done).await
    }

    /// Stops the writers now and waits until their runtime is down.
    pub async fn stop(self) {
        let Term { stop, mut done } = self;
        let _ = stop.send(());
        if let Err(error) = outcome(&mut done).await {
            tracing::warn!("{error:#}");
        }
    }

    /// Lets the writers finish on their own (they obey SIGTERM too) for up to `patience`, then stops
    /// them; true if they finished in time.
    pub async fn drain(mut self, patience: Duration) -> bool {
        let finished = tokio::time::timeout(patience, self.finished()).await.is_ok();
        if !finished {
            self.stop().await;
        }
        finished
    }
}

/// What the writers' thread reported when it ended.
async fn outcome(done: &mut oneshot::Receiver<anyhow::Result<()>>) -> anyhow::Result<()> {
    done.await.unwrap_or_else(|_| Err(anyhow::anyhow!("the writers' thread ended without a word")))
}

/// What one term's controllers are built from.
struct Parts {
    args: HostArgs,
    client: kube::Client,
    /// Takes a 429 (a disruption budget's refusal) for an answer.
    evictions: kube::Client,
    slurm: Arc<dyn Slurm>,
    slurm_nodes: Option<NodeCache>,
    policies: Arc<Policies>,
    tenancy: Arc<Tenancy>,
    loads: Loads,
    metrics: WriterMetrics,
    partitions: Vec<String>,
}

impl Parts {
    /// The controllers this host runs, side by side; the first to fail ends the host.
    async fn run(self) -> anyhow::Result<()> {
        let Parts { args, client, evictions, slurm, slurm_nodes, policies, tenancy, loads, metrics, partitions } = self;
        let namespace = args.policy_namespace.clone().unwrap_or_else(own_namespace);
        // PolicyModules get their status (and Events) from here, so they are the leader's too.
        let report = delivery::report(client.clone(), namespace, policies.clone(), loads.clone());
        tokio::spawn(report);
        // No decision before the PolicyModules there at start are loaded: the bundled defaults they
        // replace are not to decide meanwhile (followers load them too, so a failover rarely waits).
        loads.initial_load().await;
        let mut controllers: Vec<BoxFuture<'static, anyhow::Result<()>>> = Vec::new();
        let poll_interval = Duration::from_millis(args.poll_interval_ms.max(50));
        if let (Some(slurm_nodes), true) = (&slurm_nodes, args.syncer) {
            let config = crate::syncer::Config {
                namespace: args.nodeset_namespace.clone(),
                watched_conditions: args.drain_conditions.clone(),
                metrics: metrics.syncer.clone(),
                passes: metrics.passes.clone(),
            };
            let syncer =
                crate::syncer::run(client.clone(), slurm.clone(), slurm_nodes.clone(), policies.clone(), config);
            controllers.push(syncer.boxed());
        }
        // One cache of the bound pods, for the audit and for pod (anti-)affinity, when the host may read them.
        let bound_pods = (slurm_nodes.is_some() && args.pool_audit).then(|| crate::pool::watch_bound_pods(&client));
        // The scheduler's view of Slurm's jobs, which shows the pool's hold jobs too.
        let jobs = match (&slurm_nodes, args.scheduler) {
            (Some(_), true) => {
                let key = std::fs::read(&args.slurm_jwt_key).with_context(|| {
                    format!("--slurm-jwt-key {}: cannot read the JWT key", args.slurm_jwt_key.display())
                })?;
                let installation = scheduler::installation(&client, &args.scheduler_name).await?.sealing_with(&key);
                Some((installation.clone(), scheduler::JobCache::new(installation)))
            }
            _ => None,
        };
        if let (Some(slurm_nodes), Some(bound_pods)) = (&slurm_nodes, &bound_pods) {
            let holds = jobs.clone().filter(|_| args.hold_outside_pods).map(|(installation, jobs)| {
                crate::pool::HoldKeeping { jobs, slurm: slurm.clone(), installation, placeholders: args.placeholders }
            });
            let config = crate::pool::Config {
                bound_pods: bound_pods.clone(),
                scheduler_name: args.scheduler_name.clone(),
                nodeset_namespace: args.nodeset_namespace.clone(),
                taint_nodes: args.taint_slurm_nodes,
                interval: poll_interval,
                metrics: metrics.pool.clone(),
                holds,
                node_list: args.slurm_nodes_configmap.as_deref().map(|list| match list.split_once('/') {
                    Some((namespace, name)) => crate::pool::NodeList { namespace: namespace.into(), name: name.into() },
                    None => crate::pool::NodeList { namespace: own_namespace(), name: list.into() },
                }),
            };
            controllers.push(crate::pool::run(client.clone(), slurm_nodes.clone(), config).boxed());
        }
        if let (Some(slurm_nodes), true) = (slurm_nodes.clone(), args.nodeset_controller) {
            let cluster = ClusterSettings {
                conf_server: conf_server(args.slurmctld_address.as_deref(), &args.slurm_url)?,
                slurm_key_secret: args.slurm_key_secret.clone(),
            };
            let config =
                nodeset::Config { cluster, namespace: args.nodeset_namespace.clone(), metrics: metrics.passes.clone() };
            controllers
                .push(nodeset::run(client.clone(), slurm.clone(), slurm_nodes, policies.clone(), config).boxed());
        }
        if let (Some(slurm_nodes), Some((installation, jobs))) = (slurm_nodes, jobs) {
            let slurm_rules = args.stated_slurm_rules();
            let config = scheduler::Config {
                scheduler_name: args.scheduler_name,
                poll_interval,
                cluster: policy::Cluster {
                    partitions,
                    default_partition: args.default_partition,
                    default_account: args.default_account,
                    kill_wait_seconds: args.slurm_kill_wait,
                },
                metrics: metrics.scheduler.clone(),
                scope: scheduler::Scope::new(&args.watch_namespaces),
                fast_path: args.fast_path,
                placeholders: args.placeholders,
                max_array_tasks: args.max_array_tasks as usize,
                preemption: args.preemption,
                slurm_rules,
                evictions,
                tenancy,
                slurmd_namespace: args.nodeset_namespace.clone(),
                bound_pods,
                installation,
                jobs,
                volume_topology: args.volume_topology,
            };
            controllers.push(scheduler::run(client, slurm, slurm_nodes, policies, config).boxed());
        }
        futures::future::try_join_all(controllers).await.map(drop)
    }
}
