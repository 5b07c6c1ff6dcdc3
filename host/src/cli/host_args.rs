//! `sunk host`'s command line, and what follows from it alone.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;

use crate::delivery::Decision;
use crate::scheduler;
use crate::scheduler::preemption::{self, PreemptType};
use crate::slurm::PreemptModes;
use crate::tenancy::Tenancy;

#[derive(Args, Clone)]
pub struct HostArgs {
    /// kubeconfig to use; without it, KUBECONFIG, ~/.kube/config or the in-cluster service account.
    #[arg(long, env = "SUNK_KUBECONFIG")]
    pub(super) kubeconfig: Option<PathBuf>,
    /// slurmrestd's base URL.
    #[arg(long, env = "SUNK_SLURM_URL", default_value = "http://127.0.0.1:6820")]
    pub(super) slurm_url: String,
    /// The cluster's JWT key (AuthAltParameters=jwt_key=...); the host signs its own tokens with it.
    #[arg(long, env = "SUNK_SLURM_JWT_KEY")]
    pub(super) slurm_jwt_key: PathBuf,
    /// The Slurm user the host acts as: SlurmUser (or root), the only users slurmctld lets write an
    /// admin comment, submit a job as another user and name one in `X-SLURM-USER-NAME`.
    #[arg(long, env = "SUNK_SLURM_USER", default_value = "slurm")]
    pub(super) slurm_user: String,
    /// Pods with this `spec.schedulerName` are scheduled through Slurm.
    #[arg(long, env = "SUNK_SCHEDULER_NAME", default_value = "sunk")]
    pub(super) scheduler_name: String,
    /// How often Slurm's job list is polled, in milliseconds.
    #[arg(long, env = "SUNK_POLL_INTERVAL_MS", default_value_t = 500)]
    pub(super) poll_interval_ms: u64,
    /// Requests to slurmrestd in flight at once (each is a new slurmctld connection; see docs/benchmarks.md
    /// for why few is faster on Slurm 24.11).
    #[arg(long, env = "SUNK_SLURM_MAX_REQUESTS", default_value_t = crate::slurm::DEFAULT_MAX_IN_FLIGHT as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) slurm_max_requests: u64,
    /// Slurm's KillWait in seconds; pods must have a termination grace period at least 5 s shorter.
    #[arg(long, env = "SUNK_SLURM_KILL_WAIT", default_value_t = 30)]
    pub(super) slurm_kill_wait: u32,
    /// Account for placeholder jobs whose pod names none.
    #[arg(long, env = "SUNK_DEFAULT_ACCOUNT")]
    pub(super) default_account: Option<String>,
    /// Partition for placeholder jobs whose pod names none (Slurm's default partition when unset).
    #[arg(long, env = "SUNK_DEFAULT_PARTITION")]
    pub(super) default_partition: Option<String>,
    /// Where /metrics and /healthz are served.
    #[arg(long, env = "SUNK_HTTP_ADDR", default_value = "0.0.0.0:8080")]
    pub(super) http_addr: SocketAddr,
    /// The namespace whose PolicyModules (and their ConfigMaps and Secrets) the host loads; by default
    /// the host's own namespace in a cluster, else `default`.
    #[arg(long, env = "SUNK_POLICY_NAMESPACE")]
    pub(super) policy_namespace: Option<String>,
    /// A directory of policy modules (`job-mapper.wasm`, `preemption.wasm`, `drain.wasm`, each with an
    /// optional `<decision>.config`), polled for changes. PolicyModules take precedence over it.
    #[arg(long, env = "SUNK_POLICY_DIR")]
    pub(super) policy_dir: Option<PathBuf>,
    /// What each namespace's pods may get in Slurm: a JSON document (the chart renders it from its
    /// `tenancy` values). Without it, every placeholder runs as `nobody` and no annotation asking for
    /// an identity, account, partition, QOS, reservation, priority, nodes or directory is honoured.
    #[arg(long, env = "SUNK_TENANCY")]
    pub(super) tenancy: Option<PathBuf>,
    /// Decision points whose failing module (a trap, out of fuel or time, an invalid answer) is
    /// replaced by the bundled default for that decision. Repeatable: job-mapper, preemption, drain.
    /// Without it a decision whose module fails fails closed: the pod waits (`PolicyFailed`),
    /// nothing is preempted, no node is drained or resumed, and the decision is retried.
    #[arg(long = "policy-fallback", env = "SUNK_POLICY_FALLBACK", value_delimiter = ',')]
    pub(super) fallback: Vec<Decision>,
    /// Decision points that fail closed, which every one does unless `--policy-fallback` names it;
    /// kept for earlier installations, and it beats `--policy-fallback`.
    #[arg(long = "policy-fail-closed", env = "SUNK_POLICY_FAIL_CLOSED", value_delimiter = ',')]
    pub(super) fail_closed: Vec<Decision>,
    /// Runs the pod scheduler (pods whose schedulerName is --scheduler-name). `--scheduler=false`
    /// turns it off, e.g. for a host that only keeps NodeSets.
    #[arg(long, env = "SUNK_SCHEDULER", default_value_t = true, action = clap::ArgAction::Set)]
    pub(super) scheduler: bool,
    /// Runs the NodeSet controller (slurmd pods on the Nodes NodeSets select). `--nodeset-controller=false`
    /// turns it off.
    #[arg(long, env = "SUNK_NODESET_CONTROLLER", default_value_t = true, action = clap::ArgAction::Set)]
    pub(super) nodeset_controller: bool,
    /// slurmctld's `host:port` that slurmd pods fetch their configuration from (`--conf-server`);
    /// default: the host of --slurm-url, port 6817.
    #[arg(long, env = "SUNK_SLURMCTLD_ADDRESS")]
    pub(super) slurmctld_address: Option<String>,
    /// The Secret (key `slurm.key`) with the cluster's auth key, mounted into slurmd pods of NodeSets
    /// that name none.
    #[arg(long, env = "SUNK_SLURM_KEY_SECRET", default_value = "slurm-key")]
    pub(super) slurm_key_secret: String,
    /// Only pods of these namespaces are scheduled (a comma list); all namespaces by default. With
    /// exactly one, the host watches only that namespace's pods.
    #[arg(long, env = "SUNK_WATCH_NAMESPACES", value_delimiter = ',')]
    pub(super) watch_namespaces: Vec<String>,
    /// Places a pod at once when Slurm has room (an immediate allocation, bound in milliseconds)
    /// before falling back to a queued placeholder; `--fast-path=false` always queues. Slurm grants
    /// it only to a job that may start now ahead of every waiting one. Needs slurm.conf's
    /// InactiveLimit=0 (the default).
    #[arg(long, env = "SUNK_FAST_PATH", default_value_t = true, action = clap::ArgAction::Set)]
    pub(super) fast_path: bool,
    /// What a queued placeholder job is: `batch`, a batch job running `sleep` (bursts go as job
    /// arrays); `external`, where Slurm has them (26.05), a job that launches nothing on its node,
    /// one submission per pod, with no Prolog or Epilog.
    #[arg(long, env = "SUNK_PLACEHOLDERS", value_enum, default_value_t = scheduler::Placeholders::Batch)]
    pub(super) placeholders: scheduler::Placeholders,
    /// Pods that arrive while a submission is in flight go to Slurm together, as one job array of at
    /// most this many tasks (one per pod); 1 submits every pod as a job of its own.
    #[arg(long, env = "SUNK_MAX_ARRAY_TASKS", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub(super) max_array_tasks: u64,
    /// Lets a pod with a PriorityClass preempt lower-priority Slurm jobs and pods when Slurm has no
    /// room for it, as the preemption policy decides. `--preemption=false` turns it off.
    #[arg(long, env = "SUNK_PREEMPTION", default_value_t = true, action = clap::ArgAction::Set)]
    pub(super) preemption: bool,
    /// slurm.conf's PreemptType (`preempt/none`, `preempt/partition_prio`, `preempt/qos`), for a
    /// slurmrestd that cannot say it (before Slurm 26.05, whose own answer beats this). The host
    /// preempts only jobs Slurm's own rules let be preempted, or that a grant names: unset there,
    /// only what grants name.
    #[arg(long, env = "SUNK_SLURM_PREEMPT_TYPE")]
    pub(super) slurm_preempt_type: Option<PreemptType>,
    /// slurm.conf's PreemptMode (`REQUEUE`, `CANCEL`, `SUSPEND,GANG`, `OFF`...), with
    /// --slurm-preempt-type; Slurm's default, OFF, when unset.
    #[arg(long, env = "SUNK_SLURM_PREEMPT_MODE", value_parser = PreemptModes::parse_conf)]
    pub(super) slurm_preempt_mode: Option<PreemptModes>,
    /// slurm.conf's PreemptExemptTime (`00:05:00`, `5`, `1-0`), with --slurm-preempt-type.
    #[arg(long, env = "SUNK_SLURM_PREEMPT_EXEMPT_TIME", value_parser = preemption::slurm_duration)]
    pub(super) slurm_preempt_exempt_time: Option<u64>,
    /// Partitions with a PreemptMode of their own (`urgent=OFF`), for a slurmrestd that does not list
    /// it (before data parser v0.0.45); every other takes the cluster's. Repeatable, or space-separated.
    #[arg(long = "slurm-partition-preempt-mode", env = "SUNK_SLURM_PARTITION_PREEMPT_MODES",
          value_delimiter = ' ', value_parser = preemption::partition_preempt_mode)]
    pub(super) slurm_partition_preempt_modes: Vec<(String, PreemptModes)>,
    /// Only the NodeSets of this namespace (and, for the Syncer, only their slurmd pods); all namespaces
    /// by default.
    #[arg(long, env = "SUNK_NODESET_NAMESPACE")]
    pub(super) nodeset_namespace: Option<String>,
    /// Runs the Syncer (Slurm node state <-> Kubernetes Nodes and slurmd pods; cordons and node
    /// problems drain Slurm nodes). `--syncer=false` turns it off.
    #[arg(long, env = "SUNK_SYNCER", default_value_t = true, action = clap::ArgAction::Set)]
    pub(super) syncer: bool,
    /// Audits every Node that runs a Slurm node: what Slurm offers there beside the pods outside Slurm
    /// against what the Node offers (`sunk_pool_overcommitted`, the Node's `SlurmPoolOvercommitted`
    /// condition, an Event naming the pods). Needs to read every pod. `--pool-audit=false` turns it off.
    #[arg(long, env = "SUNK_POOL_AUDIT", default_value_t = true, action = clap::ArgAction::Set)]
    pub(super) pool_audit: bool,
    /// Reads PersistentVolumeClaims (in the scheduler's namespaces), PersistentVolumes and
    /// StorageClasses, so that a pod goes only to Nodes its claimed volumes can be mounted on (a
    /// volume's node affinity and zone labels). `--volume-topology=false` reads none: a pod that
    /// mounts a claim then waits `Unsupported`.
    #[arg(long, env = "SUNK_VOLUME_TOPOLOGY", default_value_t = true, action = clap::ArgAction::Set)]
    pub(super) volume_topology: bool,
    /// With the pool audit: taints every Node that runs a Slurm node `sunk.dev/slurm-node:NoSchedule`,
    /// so that kube-scheduler places there only pods that tolerate it; sunk's pods need not.
    /// `--taint-slurm-nodes=false` turns it off.
    #[arg(long, env = "SUNK_TAINT_SLURM_NODES", default_value_t = true, action = clap::ArgAction::Set)]
    pub(super) taint_slurm_nodes: bool,
    /// With the pool audit and the scheduler: where Slurm offers what pods outside it hold (DaemonSets,
    /// static pods, the slurmd pod's own requests), hold jobs of the host's hold that in Slurm, so no
    /// job or sunk pod is given it. `--hold-outside-pods=false` only reports it.
    #[arg(long, env = "SUNK_HOLD_OUTSIDE_PODS", default_value_t = true, action = clap::ArgAction::Set)]
    pub(super) hold_outside_pods: bool,
    /// With the pool audit: the ConfigMap (`[namespace/]name`, the host's namespace by default) whose
    /// keys it keeps as the Nodes that run slurmd, for the chart's admission policy that refuses pods
    /// created on them by name.
    #[arg(long, env = "SUNK_SLURM_NODES_CONFIGMAP")]
    pub(super) slurm_nodes_configmap: Option<String>,
    /// Node condition types, besides `Ready`, whose state the drain policy is shown (node-problem-
    /// detector style, e.g. `GpuUnhealthy,KernelDeadlock`). Comma-separated or repeated.
    #[arg(long = "drain-conditions", env = "SUNK_DRAIN_CONDITIONS", value_delimiter = ',')]
    pub(super) drain_conditions: Vec<String>,
    /// Runs the controllers that write (submit, bind, cancel, drain, update NodeSets and
    /// PolicyModules) only while this process holds a Lease, so that several replicas can run: one
    /// leads, the others serve /metrics, /healthz and /readyz and take over when it goes.
    #[arg(long, env = "SUNK_LEADER_ELECTION", default_value_t = false, num_args = 0..=1,
          default_missing_value = "true", action = clap::ArgAction::Set)]
    pub(super) leader_election: bool,
    /// The Lease's namespace; default: POD_NAMESPACE, else the host's own namespace in a cluster,
    /// else `default`.
    #[arg(long, env = "SUNK_LEADER_ELECTION_NAMESPACE")]
    pub(super) leader_election_namespace: Option<String>,
    /// The Lease's name; replicas of one host share it.
    #[arg(long, env = "SUNK_LEADER_ELECTION_LEASE", default_value = "sunk-host")]
    pub(super) leader_election_lease: String,
}

impl HostArgs {
    /// slurm.conf's preemption lines as the flags state them.
    pub(super) fn stated_slurm_rules(&self) -> preemption::StatedRules {
        preemption::StatedRules {
            preempt_type: self.slurm_preempt_type,
            mode: self.slurm_preempt_mode,
            exempt_time: self.slurm_preempt_exempt_time,
            partition_modes: self.slurm_partition_preempt_modes.iter().cloned().collect(),
        }
    }
}

/// The namespace a pod's service account lives in, when running in a cluster.
const SERVICE_ACCOUNT_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// `--slurm-url` as given, once it is an http(s) URL naming a host: a typo is no outage to wait out.
pub fn slurm_url(url: &str) -> anyhow::Result<&str> {
    let parsed = reqwest::Url::parse(url).with_context(|| format!("--slurm-url {url:?} is not a URL"))?;
    anyhow::ensure!(
        matches!(parsed.scheme(), "http" | "https") && parsed.host_str().is_some_and(|host| !host.is_empty()),
        "--slurm-url {url:?} is not an http:// or https:// URL naming slurmrestd's host"
    );
    Ok(url)
}

/// `--slurmctld-address`, or the host of slurmrestd's URL with slurmctld's default port.
pub fn conf_server(address: Option<&str>, slurm_url: &str) -> anyhow::Result<String> {
    if let Some(address) = address {
        return Ok(address.to_owned());
    }
    let url = reqwest::Url::parse(slurm_url).with_context(|| format!("--slurm-url {slurm_url} is not a URL"))?;
    let host = url.host_str().with_context(|| format!("--slurm-url {slurm_url} names no host"))?;
    Ok(format!("{host}:6817"))
}

/// The tenancy document `--tenancy` names, or the default that grants nothing.
pub fn tenancy(path: Option<&std::path::Path>) -> anyhow::Result<Tenancy> {
    let tenancy = match path {
        None => Tenancy::default(),
        Some(path) => Tenancy::load(path).context("--tenancy")?,
    };
    if tenancy.trust_annotations {
        tracing::warn!(
            "tenancy.trustAnnotations is on: every pod's annotations are honoured as they are, placeholders run as whoever they name"
        );
    }
    Ok(tenancy)
}

/// The host's own namespace in a cluster (its service account's), else `default`.
pub fn own_namespace() -> String {
    std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE)
        .map(|ns| ns.trim().to_owned())
        .unwrap_or_else(|_| "default".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slurm_url_must_be_http_and_name_a_host() {
        for good in ["http://127.0.0.1:6820", "https://slurmrestd.slurm.svc:6820/", "http://slurmrestd"] {
            assert_eq!(slurm_url(good).unwrap(), good);
        }
        for bad in ["not a url", "127.0.0.1:6820", "slurmrestd:6820", "ftp://x", "http://", "unix:/run/slurmrestd.sock"]
        {
            let error = slurm_url(bad).unwrap_err().to_string();
            assert!(error.starts_with(&format!("--slurm-url {bad:?}")), "{bad}: {error}");
        }
    }

    #[test]
    fn the_conf_server_defaults_to_slurmrestds_host() {
        assert_eq!(conf_server(None, "http://10.0.0.5:6820").unwrap(), "10.0.0.5:6817");
        assert_eq!(conf_server(Some("ctld:7000"), "http://x:1").unwrap(), "ctld:7000");
        assert!(conf_server(None, "not a url").is_err());
    }
}
