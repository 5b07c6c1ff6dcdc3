//! What a chaos run plays on: a namespace of its own, the chart's host installed into it (two
//! replicas behind a Lease, NodeSet controller, Syncer and scheduler), and a NodeSet of slurmd pods
//! over three Nodes of the local cluster.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use sunk_e2e::{Cluster, NodeGuard, Priority, create_nodeset, slurm_node, wait_for};

pub const POOL_LABEL: &str = "sunk.dev/e2e-pool";
pub const POOL: [&str; 3] = ["kube-node-3", "kube-node-4", "kube-node-5"];
/// The preemptors' PriorityClass value, and the preemption rank the run's namespace is granted.
const PREEMPTOR_PRIORITY: i32 = 1000;
const REGISTER: Duration = Duration::from_secs(120);

pub struct World {
    pub cluster: Cluster,
    pub release: String,
    /// The PriorityClass of the workload's preemptors (its other pods have none).
    pub preemptor_class: Priority,
    /// Takes the pool's label off its Nodes when the run ends.
    _pool: NodeGuard,
}

impl World {
    pub async fn up() -> anyhow::Result<Self> {
        let cluster = Cluster::connect("chaos").await?;
        cluster.create_slurm_key_secret("slurm-key").await?;
        let nodes = NodeGuard::new(&POOL);
        for node in POOL {
            nodes.label(node, (POOL_LABEL, &cluster.namespace))?;
        }
        let namespace = format!("nodesetController.namespace={}", cluster.namespace);
        // The run's namespace may preempt up to its preemptors' rank (the chart's default grant: none),
        // the jobs of the default partition too, which Slurm's own rules keep from its placeholders.
        let grants = serde_json::json!([{"namespaces": [&cluster.namespace], "maxPriority": PREEMPTOR_PRIORITY,
                                         "preemptable": {"partitions": ["batch"]}}]);
        let grants = format!("tenancy.grants={grants}");
        let values = [
            "nodesetController.enabled=true",
            &namespace,
            "replicas=2",
            "leaderElection.enabled=true",
            "slurm.slurmctldAddress=slurmctld.slurm.svc.cluster.local:6817",
            "slurm.keySecret=slurm-key",
        ];
        let mut extra: Vec<&str> = values.iter().flat_map(|value| ["--set", value]).collect();
        extra.extend(["--set-json", &grants]);
        let preemptor_class = Priority::create(&cluster, "preemptor", PREEMPTOR_PRIORITY).await?;
        let release = cluster.install_host_chart(&extra).await?;
        // slurmd asks the kubelet for no CPU (its 1-CPU limit is what Slurm gets): a pod bound while
        // the one before it on the Node still terminates is not refused for CPU.
        let nodeset = serde_json::json!({"template": {"spec": {
            "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "slurmd", "image": sunk_e2e::slurmd_image(), "securityContext": {"privileged": true},
                            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "0"}}}]
        }}});
        create_nodeset(&cluster, "pool", (POOL_LABEL, &cluster.namespace), nodeset).await?;
        let world = Self { cluster, release, preemptor_class, _pool: nodes };
        for node in POOL {
            wait_for(&format!("Slurm node {node} to register IDLE from the run's NodeSet"), REGISTER, || async {
                let found = slurm_node(&world.cluster, node).await.ok()??;
                (found.state.first().map(String::as_str) == Some("IDLE")
                    && found.comment.contains(&world.cluster.namespace))
                .then_some(())
            })
            .await?;
        }
        wait_for("a leader", Duration::from_secs(60), || async { world.leader().await }).await?;
        Ok(world)
    }

    /// The pod that holds the host's Lease now, if one does.
    pub async fn leader(&self) -> Option<String> {
        self.lease_renewed_since(None).await
    }

    /// The pod that holds the host's Lease and renewed it after `after` (any time if `None`).
    pub async fn lease_renewed_since(&self, after: Option<Timestamp>) -> Option<String> {
        let leases: Api<Lease> = Api::namespaced(self.cluster.kube.clone(), &self.cluster.namespace);
        let listed = leases.list(&ListParams::default()).await.ok()?;
        let spec = listed.items.into_iter().next()?.spec?;
        let renewed = spec.renew_time?.0;
        let held_for = Duration::from_secs(u64::try_from(spec.lease_duration_seconds?).ok()?);
        let age = Timestamp::now().duration_since(renewed);
        let fresh = age.as_secs_f64() < held_for.as_secs_f64() && after.is_none_or(|after| renewed > after);
        fresh.then_some(spec.holder_identity?)
    }

    /// Whether the kubelet of `node` renewed its Node Lease after `after`.
    pub async fn kubelet_renewed_since(&self, node: &str, after: Timestamp) -> bool {
        let leases: Api<Lease> = Api::namespaced(self.cluster.kube.clone(), "kube-node-lease");
        let Ok(lease) = leases.get(node).await else { return false };
        lease.spec.and_then(|spec| spec.renew_time).is_some_and(|renewed| renewed.0 > after)
    }

    /// The names of the host's pods (its replicas).
    pub async fn host_pods(&self) -> Vec<String> {
        let selector = format!("app.kubernetes.io/instance={}", self.release);
        let Ok(pods) = self.cluster.pods().list(&ListParams::default().labels(&selector)).await else {
            return Vec::new();
        };
        pods.items
            .iter()
            .filter_map(|pod| pod.metadata.name.clone())
            .filter(|name| name.starts_with(&self.release))
            .collect()
    }

    /// Keeps the host replicas' logs (every container, the current and the previous run of each)
    /// beside the cluster's, for reading after the run's namespace is gone.
    pub fn keep_host_logs(&self) {
        let path = sunk_e2e::repo_root().join(format!(".cluster/logs/chaos-{}-hosts.log", self.cluster.namespace));
        let mut text = self.cluster.host_chart_log(&self.release).unwrap_or_else(|error| format!("{error:#}"));
        let selector = format!("app.kubernetes.io/instance={}", self.release);
        let namespace = self.cluster.namespace.as_str();
        let previous = ["logs", "-n", namespace, "-l", &selector, "--tail=-1", "--previous", "--prefix"];
        if let Ok(output) = sunk_e2e::kubectl(&previous).output() {
            text.push_str("\n--- previous runs of the containers ---\n");
            text.push_str(&String::from_utf8_lossy(&output.stdout));
        }
        match std::fs::write(&path, text) {
            Ok(()) => eprintln!("the hosts' logs are in {}", path.display()),
            Err(error) => eprintln!("keeping the hosts' logs in {}: {error}", path.display()),
        }
    }

    pub async fn down(self) -> anyhow::Result<()> {
        for node in POOL {
            let _ = sunk_e2e::kubectl(&["uncordon", node]).output();
        }
        // The Cluster's own cleanup (when dropped) removes the NodeSet, the pods, the jobs and the
        // Slurm nodes; the hosts go first so that none acts on the way.
        self.cluster.uninstall_host_chart(&self.release).await
    }
}
