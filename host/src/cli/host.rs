//! `sunk host`: the long-running controller.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::signal::unix::{SignalKind, signal};

use super::first_contact;
use super::host_args::{HostArgs, own_namespace};
use super::writers::{DRAIN, WriterMetrics, Writers};
use crate::delivery::{self, Decision, Loads};
use crate::http;
use crate::leader::{self, Election, Fence, LeaderGauge, Leadership};
use crate::policy::{FailureModes, OnFailure, Policies};
use crate::slurm::{NodeCache, NodeCacheConfig, Pace, SlurmClient, SlurmInfoMetric, TOKEN_LIFETIME, TokenSigner};

/// How long the way out may take to hand the Lease over.
const RELEASE: Duration = Duration::from_secs(5);

pub fn run(args: HostArgs) -> anyhow::Result<()> {
    let election = election_config(&args)?;
    let kubeconfig = args.kubeconfig.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let result = runtime.block_on(serve(args, election.clone()));
    // Every writer is a task of this runtime: once it is down nothing of this process writes any
    // more, and only then may a follower take over.
    runtime.shutdown_timeout(DRAIN);
    if let Some(config) = election {
        release_lease(kubeconfig, &config);
    }
    result
}

async fn serve(args: HostArgs, election: Option<leader::Config>) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.scheduler || args.nodeset_controller || args.syncer || args.pool_audit,
        "--scheduler=false, --nodeset-controller=false, --syncer=false and --pool-audit=false leave the host \
         nothing to do"
    );
    // Listening from the start: a SIGTERM while following, starting or waiting for Slurm must not be lost.
    let mut stop = std::pin::pin!(stop_requested()?);
    // What no waiting mends stops the host at once: a URL that is none, a key it cannot read.
    let slurm_url = super::host_args::slurm_url(&args.slurm_url)?;
    let key = std::fs::read(&args.slurm_jwt_key)
        .with_context(|| format!("--slurm-jwt-key {}: cannot read the JWT key", args.slurm_jwt_key.display()))?;
    let signer = TokenSigner::new(&key, args.slurm_user.clone(), TOKEN_LIFETIME);
    let slurm = SlurmClient::new(slurm_url, signer)?.with_max_in_flight(args.slurm_max_requests as usize);
    let client = crate::kube::connect(args.kubeconfig.as_deref()).await?;
    let policies = Arc::new(Policies::bundled(failure_modes(&args.fallback, &args.fail_closed))?);
    let tenancy = Arc::new(super::host_args::tenancy(args.tenancy.as_deref())?);
    tracing::info!(digest = policies.job_mapper.live().module.digest(), "bundled policies loaded");

    let mut registry = prometheus_client::registry::Registry::default();
    let slurm_info_metric = SlurmInfoMetric::default();
    slurm_info_metric.register(&mut registry);
    slurm.register(&mut registry);
    crate::heap::register(&mut registry);
    tokio::spawn(crate::heap::give_back_freed_memory(std::time::Duration::from_secs(10)));
    policies.metrics.register(&mut registry);
    let metrics = WriterMetrics::default();
    metrics.register(&mut registry);
    let identity = election.as_ref().map_or_else(leader::identity, |config| config.identity.clone());
    let leading = LeaderGauge::register(&mut registry, &identity);
    let poll_interval = Duration::from_millis(args.poll_interval_ms.max(50));
    // One cache of Slurm's nodes, polled once, read by every controller that needs it.
    let slurm_nodes = (args.nodeset_controller || args.syncer || args.scheduler || args.pool_audit)
        .then(|| NodeCache::new(NodeCacheConfig::every(poll_interval)));
    if let Some(slurm_nodes) = &slurm_nodes {
        slurm_nodes.register(&mut registry);
    }
    // Ready means "can do its job here": Slurm answered once, the process serves /metrics, and, with
    // leader election, knows who leads. Slurm or the API server out of reach later shows in metrics
    // and on pods, not by taking the host out of its Service.
    let readiness = http::Readiness::default();
    let slurm_answered = readiness.gate(first_contact::CHECK, "not asked yet");
    http::serve(args.http_addr, registry, readiness.clone()).await?;

    // Which Slurm, and which API version to speak with it: asked until Slurm answers.
    let slurm_info = tokio::select! {
        info = first_contact::discover(&slurm, &slurm_answered) => info,
        () = &mut stop => {
            tracing::info!("asked to stop while waiting for Slurm");
            return Ok(());
        }
    };
    tracing::info!(release = %slurm_info.release, api = %slurm_info.api, "talking to {slurm_info}");
    slurm_info_metric.set(&slurm_info);
    let fence = if election.is_some() { Fence::closed() } else { Fence::open() };
    // What only reads runs on followers too, so that a takeover starts warm. A replica that cannot
    // reach Slurm does not stand for election: it could not lead.
    let election = election.map(|config| Election::start(client.clone(), config, fence.clone()));
    if let Some(election) = &election {
        readiness.check("leader-lease", election.synced());
    }
    // A replica polls at the leader's pace only while it leads.
    let pace = slurm_nodes.clone().filter(|_| election.is_some());
    let set_pace = |to: Pace| pace.iter().for_each(|slurm_nodes| slurm_nodes.set_pace(to));
    set_pace(Pace::StandingBy);
    if let Some(slurm_nodes) = &slurm_nodes {
        tokio::spawn(slurm_nodes.clone().run(slurm.clone()));
        tokio::spawn(crate::slurm::rediscover_after_reconnects(slurm.clone(), slurm_nodes.clone(), slurm_info_metric));
    }
    if let Some(dir) = args.policy_dir.clone() {
        tokio::spawn(delivery::watch_directory(dir, policies.clone()));
    }

    let loads = Loads::default();
    let namespace = args.policy_namespace.clone().unwrap_or_else(own_namespace);
    tokio::spawn(delivery::load(client.clone(), namespace, policies.clone(), loads.clone()));
    let writers = Writers { args, slurm, slurm_nodes, policies, tenancy, loads, metrics, fence };
    loop {
        let mut leadership = match &election {
            None => None,
            Some(election) => tokio::select! {
                leadership = election.acquire() => Some(leadership),
                () = &mut stop => return Ok(()),
            },
        };
        leading.set(true);
        set_pace(Pace::Leading);
        let mut term = writers.start()?;
        tokio::select! {
            result = term.finished() => return result,
            reason = lost(&mut leadership) => {
                // The fence closed with the loss: nothing the writers still try can leave.
                tracing::warn!("lost the leader Lease ({reason}): stopping every writer, then standing for election again");
                term.stop().await;
                leading.set(false);
                set_pace(Pace::StandingBy);
            }
            () = &mut stop => {
                // The controllers stop on the same signal once their reconciles under way are done.
                tracing::info!("asked to stop: finishing the reconciles under way");
                if !term.drain(DRAIN).await {
                    tracing::warn!(drain = ?DRAIN, "controllers still busy; stopping them");
                }
                return Ok(());
            }
        }
    }
}

/// `--leader-election` and its Lease, checked before anything starts.
fn election_config(args: &HostArgs) -> anyhow::Result<Option<leader::Config>> {
    if !args.leader_election {
        return Ok(None);
    }
    let lease = args.leader_election_lease.clone();
    anyhow::ensure!(
        is_dns_subdomain(&lease),
        "--leader-election-lease {lease:?} is not a valid Lease name (lowercase letters, digits, '-' and '.')"
    );
    let pod_namespace = std::env::var("POD_NAMESPACE").ok();
    let namespace =
        lease_namespace(args.leader_election_namespace.clone(), pod_namespace).unwrap_or_else(own_namespace);
    anyhow::ensure!(
        is_dns_subdomain(&namespace) && !namespace.contains('.'),
        "--leader-election-namespace {namespace:?} is not a namespace name"
    );
    Ok(Some(leader::Config { namespace, lease, identity: leader::identity() }))
}

/// The flag, else POD_NAMESPACE; `None` leaves it to the service account's namespace.
fn lease_namespace(flag: Option<String>, pod_namespace: Option<String>) -> Option<String> {
    flag.or(pod_namespace).map(|namespace| namespace.trim().to_owned()).filter(|namespace| !namespace.is_empty())
}

fn is_dns_subdomain(name: &str) -> bool {
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    let alphanumeric = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    name.len() <= 253
        && name.chars().all(allowed)
        && alphanumeric(name.chars().next())
        && alphanumeric(name.chars().last())
}

/// Resolves when the Lease is lost; never without leader election.
async fn lost(leadership: &mut Option<Leadership>) -> String {
    match leadership {
        Some(leadership) => leadership.lost().await,
        None => std::future::pending().await,
    }
}

/// Resolves on SIGTERM or SIGINT; listening starts at the call.
fn stop_requested() -> anyhow::Result<impl Future<Output = ()>> {
    let mut terminate = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("listening for SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
    })
}

/// Hands the Lease over on the way out, if this process holds it, so a follower takes over at once
/// instead of when the claim runs out. The host's runtime is gone by now: this has its own, and its
/// own client.
fn release_lease(kubeconfig: Option<PathBuf>, config: &leader::Config) {
    let release = async {
        let client = crate::kube::connect(kubeconfig.as_deref()).await?;
        leader::release(client, config).await.context("releasing the leader Lease")
    };
    let released = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map(|runtime| runtime.block_on(async { tokio::time::timeout(RELEASE, release).await }));
    match released {
        Ok(Ok(Ok(()))) => tracing::info!(lease = %config.lease, "leader Lease released, if this host held it"),
        Ok(Ok(Err(error))) => tracing::warn!(lease = %config.lease, "{error:#}; it runs out on its own"),
        Ok(Err(_)) => {
            tracing::warn!(lease = %config.lease, "releasing the leader Lease timed out; it runs out on its own")
        }
        Err(error) => tracing::warn!(lease = %config.lease, %error, "no runtime to release the leader Lease"),
    }
}

/// Fail closed everywhere but where the operator opted into the bundled default.
fn failure_modes(fallback: &[Decision], fail_closed: &[Decision]) -> FailureModes {
    let mode = |decision| match fallback.contains(&decision) && !fail_closed.contains(&decision) {
        true => OnFailure::Fallback,
        false => OnFailure::FailClosed,
    };
    FailureModes {
        job_mapper: mode(Decision::JobMapper),
        preemption: mode(Decision::Preemption),
        drain: mode(Decision::Drain),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_decision_fails_closed_unless_the_operator_opted_into_fallback() {
        let closed = failure_modes(&[], &[]);
        assert_eq!(
            (closed.job_mapper, closed.preemption, closed.drain),
            (OnFailure::FailClosed, OnFailure::FailClosed, OnFailure::FailClosed)
        );
        let opted = failure_modes(&[Decision::JobMapper, Decision::Drain], &[Decision::Drain]);
        assert_eq!(
            (opted.job_mapper, opted.preemption, opted.drain),
            (OnFailure::Fallback, OnFailure::FailClosed, OnFailure::FailClosed)
        );
    }

    #[test]
    fn the_lease_namespace_is_the_flag_else_pod_namespace() {
        assert_eq!(lease_namespace(Some("ops".into()), Some("pod".into())).as_deref(), Some("ops"));
        assert_eq!(lease_namespace(None, Some("pod".into())).as_deref(), Some("pod"));
        assert_eq!(lease_namespace(None, Some(" ".into())), None);
        assert_eq!(lease_namespace(None, None), None);
    }

    #[test]
    fn lease_names_must_be_dns_subdomains() {
        for good in ["sunk-host", "a", "sunk.host-2"] {
            assert!(is_dns_subdomain(good), "{good}");
        }
        for bad in ["", "Sunk", "-x", "x-", "a_b", &"a".repeat(254)] {
            assert!(!is_dns_subdomain(bad), "{bad}");
        }
    }

    #[test]
    fn leader_election_is_off_unless_asked_and_takes_a_bare_flag() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            host: HostArgs,
        }
        let parse = |extra: &[&str]| {
            let args = ["sunk", "--slurm-jwt-key", "/k"].iter().chain(extra).copied();
            Cli::try_parse_from(args).map(|cli| cli.host)
        };
        assert!(!parse(&[]).unwrap().leader_election);
        assert!(parse(&["--leader-election"]).unwrap().leader_election);
        assert!(parse(&["--leader-election=true"]).unwrap().leader_election);
        assert!(!parse(&["--leader-election=false"]).unwrap().leader_election);
        assert!(parse(&["--leader-election=maybe"]).is_err());
        let host = parse(&["--leader-election=true", "--leader-election-namespace", "ops"]).unwrap();
        let config = election_config(&host).unwrap().unwrap();
        assert_eq!((config.namespace.as_str(), config.lease.as_str()), ("ops", "sunk-host"));
        let bad = parse(&["--leader-election", "--leader-election-lease", "Sunk_Host"]).unwrap();
        let error = election_config(&bad).unwrap_err().to_string();
        assert!(error.contains("--leader-election-lease \"Sunk_Host\""), "{error}");
    }
}
