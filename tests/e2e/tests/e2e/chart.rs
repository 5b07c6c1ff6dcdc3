//! The Helm chart, installed by the real `helm` into the local cluster: the host runs as a pod from
//! the project's sunk image, with the chart's ServiceAccount and RBAC, reaches the API server and
//! slurmrestd through cluster Services and DNS, and schedules a pod through Slurm. And the chart's
//! values are checked: `helm lint --strict`, and a misspelt or mistyped value fails the install
//! naming it.

use std::time::Duration;

use sunk_e2e::{CHART, Cluster, node_name, pod};

#[tokio::test]
async fn the_chart_runs_the_host_in_a_pod_that_schedules_through_slurm() -> anyhow::Result<()> {
    let cluster = Cluster::connect("chart").await?;
    // The host's pods pass the `restricted` Pod Security Standard: the API server refuses them otherwise.
    let restricted = "pod-security.kubernetes.io/enforce=restricted";
    let labelled = sunk_e2e::kubectl(&["label", "namespace", &cluster.namespace, restricted]).output()?;
    anyhow::ensure!(labelled.status.success(), "{}", String::from_utf8_lossy(&labelled.stderr));
    let release = cluster.install_host_chart(&[]).await?;

    // A user's pod in that namespace must pass `restricted` too.
    let mut rbac = pod("rbac", "1", "256Mi");
    rbac["spec"]["securityContext"] =
        serde_json::json!({"runAsNonRoot": true, "runAsUser": 65534, "seccompProfile": {"type": "RuntimeDefault"}});
    rbac["spec"]["containers"][0]["securityContext"] =
        serde_json::json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}});
    cluster.create_pod(rbac).await?;
    let bound = cluster
        .wait_pod("rbac", "the pod to be bound by the host running in the chart's pod", Duration::from_secs(60), |p| {
            node_name(p).is_some()
        })
        .await?;
    assert!(node_name(&bound).is_some());
    cluster.wait_event("rbac", "Scheduled, recorded with the chart's RBAC", |reason, _| reason == "Scheduled").await?;
    cluster.helm(&["test", &release, "--timeout", "60s"])?;
    only_sunk_may_place_pods_tolerating_the_slurm_node_taint(&cluster).await?;

    cluster.uninstall_host_chart(&release).await?;
    Ok(())
}

/// The chart's admission policies: in a namespace they do not allow, a pod tolerating the Slurm Node
/// taint is refused, naming the field, unless sunk's scheduler places it; and so is a pod created on
/// a Slurm Node by name, whatever its scheduler.
async fn only_sunk_may_place_pods_tolerating_the_slurm_node_taint(cluster: &Cluster) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::{Namespace, Pod};
    use kube::api::{Api, DeleteParams, PostParams};
    let other = format!("{}-other", cluster.namespace);
    let namespaces: Api<Namespace> = Api::all(cluster.kube.clone());
    let namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": other}}))?;
    namespaces.create(&PostParams::default(), &namespace).await?;
    let pods: Api<Pod> = Api::namespaced(cluster.kube.clone(), &other);
    let tolerating = |name: &str, scheduler: &str| -> anyhow::Result<Pod> {
        let mut tolerating = pod(name, "100m", "64Mi");
        tolerating["metadata"]["namespace"] = other.clone().into();
        tolerating["spec"]["schedulerName"] = scheduler.into();
        tolerating["spec"]["tolerations"] = serde_json::json!([{"key": "sunk.dev/slurm-node", "operator": "Exists"}]);
        Ok(serde_json::from_value(tolerating)?)
    };
    // The API server takes up a new policy within moments: until then a pod is admitted, and deleted.
    let refused = sunk_e2e::wait_for("the admission policy to refuse the pod", Duration::from_secs(60), || async {
        match pods.create(&PostParams::default(), &tolerating("elsewhere", "default-scheduler").ok()?).await {
            Ok(_) => {
                let _ = pods.delete("elsewhere", &DeleteParams::default().grace_period(0)).await;
                None
            }
            Err(error) => Some(error.to_string()),
        }
    })
    .await;
    let through_slurm = pods.create(&PostParams::default(), &tolerating("through-slurm", sunk_e2e::SCHEDULER)?).await;
    // Named once the host has listed the Nodes that run slurmd (kube-node-1 and -2 here).
    let by_name = sunk_e2e::wait_for("a pod on a Slurm Node by name refused", Duration::from_secs(60), || async {
        let mut named = pod("by-name", "100m", "64Mi");
        named["metadata"]["namespace"] = other.clone().into();
        named["spec"]["nodeName"] = "kube-node-1".into();
        match pods.create(&PostParams::default(), &serde_json::from_value(named).ok()?).await {
            Ok(_) => {
                let _ = pods.delete("by-name", &DeleteParams::default().grace_period(0)).await;
                None
            }
            Err(error) => Some(error.to_string()),
        }
    })
    .await;
    let _ = namespaces.delete(&other, &DeleteParams::default()).await;
    let by_name = by_name?;
    assert!(by_name.contains("spec.nodeName: kube-node-1 runs a Slurm node"), "{by_name}");
    let refused = refused?;
    assert!(refused.contains("spec.tolerations") && refused.contains("sunk.dev/slurm-node"), "{refused}");
    through_slurm.map_err(|error| anyhow::anyhow!("a pod sunk places may tolerate the taint: {error}"))?;
    Ok(())
}

#[tokio::test]
async fn the_chart_lints_and_refuses_misspelt_or_mistyped_values_naming_them() -> anyhow::Result<()> {
    let cluster = Cluster::connect("chart-values").await?;
    cluster.helm(&["lint", "--strict", CHART])?;
    cluster.helm(&["lint", "--strict", CHART, "--set", "slurmCluster.enabled=true"])?;

    let refused = |args: &[&str]| {
        let mut install = vec!["install", "typo", CHART];
        install.extend_from_slice(args);
        match cluster.helm(&install) {
            Ok(_) => anyhow::bail!("helm install {args:?} succeeded"),
            Err(error) => Ok(error.to_string()),
        }
    };
    let typo = refused(&["--set", "slurmCluster.enabld=true"])?;
    assert!(typo.contains("'enabld' not allowed") && typo.contains("/slurmCluster"), "{typo}");
    let nested = refused(&["--set-json", r#"slurmCluster.nodesets=[{"name":"cpu","slurmd":{"resurces":{}}}]"#])?;
    assert!(
        nested.contains("'resurces' not allowed") && nested.contains("/slurmCluster/nodesets/0/slurmd"),
        "{nested}"
    );
    let wrong_type = refused(&["--set", "replicas=two"])?;
    assert!(wrong_type.contains("/replicas") && wrong_type.contains("want integer"), "{wrong_type}");
    let bad_scope = refused(&["--set", "scope.type=everywhere"])?;
    assert!(bad_scope.contains("/scope/type"), "{bad_scope}");
    // Two replicas without leader election would both submit placeholders.
    let unsafe_replicas = refused(&["--set", "leaderElection.enabled=false"])?;
    assert!(unsafe_replicas.contains("replicas > 1 needs leaderElection.enabled"), "{unsafe_replicas}");

    // Values that fit the schema but not each other.
    let partition = refused(&[
        "--set",
        "slurmCluster.enabled=true",
        "--set-json",
        r#"slurmCluster.nodesets=[{"name":"cpu","partitions":["bach"]}]"#,
    ])?;
    assert!(partition.contains(r#"slurmCluster.nodesets[cpu].partitions: "bach" is not in"#), "{partition}");
    // A backup slurmctld takes control from the state the primary saved: on a claim both can mount.
    let backup = ["--set", "slurmCluster.enabled=true", "--set", "slurmCluster.controller.backup.enabled=true"];
    let without_state = refused(&backup)?;
    assert!(without_state.contains("backup needs slurmCluster.controller.persistence.enabled"), "{without_state}");
    let single_node_claim =
        refused(&[&backup[..], &["--set", "slurmCluster.controller.persistence.enabled=true"]].concat())?;
    assert!(single_node_claim.contains("persistence.accessModes [ReadWriteMany]"), "{single_node_claim}");

    // Nothing was installed.
    let releases = cluster.helm(&["list", "--all", "--short"])?;
    assert!(releases.trim().is_empty(), "releases left: {releases}");
    Ok(())
}

#[tokio::test]
async fn the_chart_renders_scope_leader_election_and_service_monitor_from_values() -> anyhow::Result<()> {
    let cluster = Cluster::connect("chart-render").await?;
    let render = |args: &[&str]| {
        let mut template = vec!["template", "r", CHART];
        template.extend_from_slice(args);
        cluster.helm(&template)
    };
    let default = render(&[])?;
    // Two replicas behind a Lease, SUNK's scheduler name, RBAC cluster-wide.
    assert!(default.contains("replicas: 2") && default.contains("--leader-election=true"), "{default}");
    assert!(default.contains("resources: [leases]"), "no Lease RBAC: {default}");
    let scheduler_name = format!("value: \"{}-r\"", cluster.namespace);
    assert!(default.contains(&scheduler_name), "scheduler name is not <namespace>-<release>: {default}");
    assert!(default.contains("name: r-sunk-") && default.contains("kind: ClusterRoleBinding"));
    assert!(!default.contains("--watch-namespaces") && default.contains("--syncer=true"));
    assert!(!default.contains("kind: ServiceMonitor"), "a ServiceMonitor without its API");

    // Scope `namespace`: the scheduler's rights only through RoleBindings in the watched namespaces.
    let scoped = render(&["--set", "scope.type=namespace", "--set", "scope.namespaces={team-a}"])?;
    let watch = format!("--watch-namespaces={},team-a", cluster.namespace);
    assert!(scoped.contains(&watch), "{scoped}");
    let scheduler_bindings: Vec<&str> =
        scoped.split("\n---").filter(|doc| doc.contains("-scheduler") && doc.contains("Binding\nmetadata")).collect();
    assert_eq!(scheduler_bindings.len(), 2, "{scheduler_bindings:?}");
    assert!(scheduler_bindings.iter().all(|doc| doc.contains("kind: RoleBinding")), "{scheduler_bindings:?}");
    assert!(scheduler_bindings.iter().any(|doc| doc.contains("namespace: team-a")));

    let single =
        render(&["--set", "replicas=1", "--set", "leaderElection.enabled=false", "--set", "syncer.enabled=false"])?;
    assert!(!single.contains("--leader-election") && !single.contains("resources: [leases]"), "{single}");
    assert!(single.contains("--syncer=false") && single.contains("type: Recreate"));
    let monitored = render(&["--api-versions", "monitoring.coreos.com/v1/ServiceMonitor"])?;
    assert!(monitored.contains("kind: ServiceMonitor"), "no ServiceMonitor with its API: {monitored}");

    // The chart's Slurm: KillWait from its slurm.conf reaches the host.
    let slurm = render(&["--set", "slurmCluster.enabled=true", "--set", "slurmCluster.config.killWait=45"])?;
    assert!(slurm.contains("KillWait=45") && slurm.contains(r#"{name: SUNK_SLURM_KILL_WAIT, value: "45"}"#));
    assert!(
        slurm.contains("SelectTypeParameters=CR_Core_Memory")
            && slurm.contains("SlurmctldParameters=enable_configless")
    );
    assert!(default.contains(r#"{name: SUNK_PLACEHOLDERS, value: "batch"}"#), "batch placeholders by default");
    // Slurm's own metrics: asked for where the slurmctld image is 25.11 or later (the default 26.05),
    // scraped by a second ServiceMonitor where the Operator's API is; never for 24.11's.
    let metrics_type = "\n    MetricsType=metrics/openmetrics\n";
    assert!(slurm.contains(metrics_type) && !slurm.contains("kind: ServiceMonitor"), "{slurm}");
    let api = ["--api-versions", "monitoring.coreos.com/v1/ServiceMonitor"];
    let slurm_monitored = render(&[&["--set", "slurmCluster.enabled=true"][..], &api].concat())?;
    let scraped = ["/metrics/jobs", "/metrics/nodes", "/metrics/partitions", "/metrics/scheduler"];
    assert!(scraped.iter().all(|path| slurm_monitored.contains(&format!("- port: slurmctld\n      path: {path}\n"))));
    assert_eq!(slurm_monitored.matches("kind: ServiceMonitor").count(), 2, "{slurm_monitored}");
    let old_slurm = ["--set", "slurmCluster.enabled=true", "--set", "slurmCluster.images.slurmctld.tag=24.11"];
    let old_slurm = render(&[&old_slurm[..], &api].concat())?;
    assert!(!old_slurm.contains(metrics_type) && !old_slurm.contains("path: /metrics/nodes"), "{old_slurm}");
    assert!(!slurm.contains("\n  topology.yaml: "), "no topology unless given one");
    let topology = std::env::temp_dir().join(format!("{}-topology.yaml", cluster.namespace));
    std::fs::write(&topology, "- topology: default\n  tree:\n    switches:\n      - switch: leaf1\n")?;
    let file = format!("slurmCluster.config.topologyYaml={}", topology.display());
    let with_topology = render(&["--set", "slurmCluster.enabled=true", "--set-file", &file]);
    std::fs::remove_file(&topology)?;
    assert!(with_topology?.contains(r#"topology.yaml: "- topology: default\n  tree:"#), "no topology.yaml");
    // The example values stay valid.
    let example = render(&["-f", "examples/helm/slurm-cluster.yaml"])?;
    assert!(example.contains("PreemptType=preempt/partition_prio") && example.contains("kind: NodeSet"));

    // NOTES warns of uids a grant gives that the chart's Slurm does not declare, and installs anyway
    // (sssd may resolve them).
    let notes = |args: &[&str]| {
        let mut install = vec!["install", "notes", CHART, "--dry-run=client", "--set", "slurmCluster.enabled=true"];
        install.extend_from_slice(args);
        cluster.helm(&install)
    };
    let grant = r#"tenancy.grants=[{"namespaces":["ml"],"user":1500,"userIds":"1500-1599"}]"#;
    let undeclared = notes(&["--set-json", grant])?;
    for line in ["tenancy.grants[0] (namespaces ml): user 1500", "tenancy.grants[0] (namespaces ml): userIds 1500-1599"]
    {
        assert!(undeclared.contains(line), "{line} in {undeclared}");
    }
    let alice = r#"slurmCluster.identity.users=[{"name":"alice","uid":1500,"gid":1500}]"#;
    let declared = notes(&["--set-json", grant, "--set-json", alice])?;
    assert!(declared.contains("userIds 1500-1599 (99 of its 100 uids)"), "{declared}");
    assert!(!declared.contains("(namespaces ml): user 1500\n"), "alice is uid 1500: {declared}");
    assert!(!notes(&[])?.contains("does not declare"), "nobody, the default grant's user, is the images' own");
    Ok(())
}
