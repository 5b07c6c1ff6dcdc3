//! The chart as `helm template` renders it, without a cluster: who its NetworkPolicies let reach
//! slurmctld, checked against the labels of the pods the chart runs, and gres.conf.

use anyhow::Context as _;
use serde_json::{Value, json};
use sunk_e2e::{BACKUP_SLURMCTLD, CHART, run_helm};

/// The chart's own Slurm with every part that runs a pod: a NodeSet, login, accounting (and a backup
/// slurmctld, [`BACKUP_SLURMCTLD`]).
const WHOLE_CLUSTER: [&str; 6] = [
    "--set-json",
    r#"slurmCluster.nodesets=[{"name":"cpu"}]"#,
    "--set",
    "slurmCluster.login.enabled=true",
    "--set",
    "slurmCluster.accounting.enabled=true",
];

#[test]
fn only_the_releases_slurm_pods_and_the_metrics_scraper_reach_slurmctld() -> anyhow::Result<()> {
    let documents = render(&[&WHOLE_CLUSTER[..], &BACKUP_SLURMCTLD].concat())?;
    let policy = find(&documents, "NetworkPolicy", "r-sunk-slurmctld").context("no slurmctld NetworkPolicy")?;
    assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress"]));
    let ingress = policy["spec"]["ingress"].as_array().context("ingress rules")?;
    assert!(ingress.iter().all(|rule| rule["ports"] == json!([{"port": 6817, "protocol": "TCP"}])), "{ingress:#?}");

    // The policy holds both controllers, which listen on 6817, and nothing else of the release.
    let protected = &policy["spec"]["podSelector"];
    let pods = pod_labels(&documents);
    let held: Vec<&str> =
        pods.iter().filter(|(_, labels)| selects(protected, labels)).map(|(pod, _)| pod.as_str()).collect();
    assert_eq!(held, ["Deployment/r-sunk-slurmctld", "StatefulSet/r-sunk-slurmctld-backup"]);

    // Every Slurm pod of the release may reach them; the host and the hook pods talk to slurmrestd.
    let peers = ingress[0]["from"].as_array().context("the first rule's peers")?;
    let admitted = |labels: &Value| {
        peers.iter().any(|peer| peer.get("namespaceSelector").is_none() && selects(&peer["podSelector"], labels))
    };
    let reaching: Vec<&str> = pods.iter().filter(|(_, labels)| admitted(labels)).map(|(pod, _)| pod.as_str()).collect();
    assert_eq!(
        reaching,
        [
            "Deployment/r-sunk-login",
            "Deployment/r-sunk-slurmctld",
            "Deployment/r-sunk-slurmdbd",
            "Deployment/r-sunk-slurmrestd",
            "NodeSet/cpu",
            "StatefulSet/r-sunk-slurmctld-backup",
        ],
        "{peers:#?}"
    );
    assert!(pods.iter().any(|(pod, _)| pod == "Deployment/r-sunk"), "the host is rendered, and kept out");
    // A slurmd pod of a NodeSet made beside the chart's: only the label the host gives every one.
    assert!(admitted(&json!({"sunk.dev/nodeset": "gpu", "app": "mine"})), "{peers:#?}");
    assert!(!admitted(&json!({"app.kubernetes.io/component": "slurmd"})), "another release's slurmd");

    // Slurm's own metrics are on for 26.05 (the default image): the scraper's rule, a Prometheus in
    // any namespace by default.
    let scraper =
        json!([{"namespaceSelector": {}, "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}]);
    assert_eq!(ingress.len(), 2, "{ingress:#?}");
    assert_eq!(ingress[1]["from"], scraper);
    Ok(())
}

#[test]
fn the_slurmctld_network_policy_follows_its_values() -> anyhow::Result<()> {
    let policy = |args: &[&str]| -> anyhow::Result<Option<Value>> {
        Ok(find(&render(args)?, "NetworkPolicy", "r-sunk-slurmctld").cloned())
    };
    // 24.11 serves no metrics: no scraper's rule.
    let old = policy(&["--set", "slurmCluster.images.slurmctld.tag=24.11"])?.context("a policy for 24.11")?;
    assert_eq!(old["spec"]["ingress"].as_array().map(Vec::len), Some(1), "{old:#}");
    let tools = json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "tools"}}});
    let monitoring = json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}});
    let extra = policy(&[
        "--set-json",
        &format!("slurmCluster.controller.networkPolicy.from=[{tools}]"),
        "--set-json",
        &format!("slurmCluster.controller.networkPolicy.metricsFrom=[{monitoring}]"),
    ])?
    .context("a policy")?;
    let ingress = &extra["spec"]["ingress"];
    assert_eq!(ingress[0]["from"].as_array().and_then(|peers| peers.last()), Some(&tools), "{ingress:#}");
    assert_eq!(ingress[1]["from"], json!([monitoring]));
    let no_scraper =
        policy(&["--set-json", "slurmCluster.controller.networkPolicy.metricsFrom=[]"])?.context("a policy")?;
    assert_eq!(no_scraper["spec"]["ingress"].as_array().map(Vec::len), Some(1), "{no_scraper:#}");
    assert!(policy(&["--set", "slurmCluster.controller.networkPolicy.enabled=false"])?.is_none());
    let host_alone = run_helm(&["template", "r", CHART, "--namespace", "sunk"])?;
    assert!(!host_alone.contains("r-sunk-slurmctld"), "a policy without the chart's Slurm");
    Ok(())
}

#[test]
fn gres_conf_autodetects_nvidia_gpus_unless_told_otherwise() -> anyhow::Result<()> {
    let gres_conf = |args: &[&str]| -> anyhow::Result<String> {
        let documents = render(args)?;
        let config = find(&documents, "ConfigMap", "r-sunk-slurm-conf").context("no slurm.conf ConfigMap")?;
        config["data"]["gres.conf"].as_str().map(str::to_owned).context("no gres.conf")
    };
    // Slurm 24.11 and 26.05 both have AutoDetect=nvidia, which needs no NVIDIA library.
    assert_eq!(gres_conf(&[])?, "AutoDetect=nvidia\n");
    assert_eq!(gres_conf(&["--set", "slurmCluster.images.slurmd.tag=24.11"])?, "AutoDetect=nvidia\n");
    assert_eq!(gres_conf(&["--set", "slurmCluster.config.gresAutoDetect=off"])?, "");
    assert_eq!(gres_conf(&["--set", "slurmCluster.config.gresAutoDetect="])?, "");
    assert_eq!(gres_conf(&["--set", "slurmCluster.config.gresAutoDetect=nvml"])?, "AutoDetect=nvml\n");
    // No GPUs in Slurm, nothing to detect.
    assert_eq!(gres_conf(&["--set-json", "slurmCluster.config.gresTypes=[]"])?, "");
    // gresConf follows; its own global AutoDetect replaces the chart's, a node's does not.
    let files = "Name=gpu Type=a100 File=/dev/nvidia[0-1]\n";
    assert_eq!(
        gres_conf(&["--set-string", &format!("slurmCluster.config.gresConf={files}")])?,
        format!("AutoDetect=nvidia\n{files}")
    );
    let own = "# ours\n  autodetect=nvml\n";
    assert_eq!(gres_conf(&["--set-string", &format!("slurmCluster.config.gresConf={own}")])?, own);
    let per_node = "NodeName=tux3 AutoDetect=off Name=gpu File=/dev/nvidia[0-3]\n";
    assert_eq!(
        gres_conf(&["--set-string", &format!("slurmCluster.config.gresConf={per_node}")])?,
        format!("AutoDetect=nvidia\n{per_node}")
    );
    let refused = gres_conf(&["--set", "slurmCluster.config.gresAutoDetect=nvidai"]).expect_err("not an AutoDetect");
    assert!(refused.to_string().contains("/slurmCluster/config/gresAutoDetect"), "{refused}");
    Ok(())
}

/// Every document `helm template` renders for the chart's own Slurm with `args`, in namespace `sunk`.
fn render(args: &[&str]) -> anyhow::Result<Vec<Value>> {
    let mut template = vec!["template", "r", CHART, "--namespace", "sunk", "--set", "slurmCluster.enabled=true"];
    template.extend_from_slice(args);
    let rendered = run_helm(&template)?;
    let documents: Vec<Value> = serde_saphyr::from_multiple(&rendered).context("parsing the rendered chart")?;
    Ok(documents.into_iter().filter(|document| !document.is_null()).collect())
}

fn find<'a>(documents: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    documents.iter().find(|document| document["kind"] == kind && document["metadata"]["name"] == name)
}

/// `Kind/name` and the labels of the pods each workload (NodeSets included) and hook renders, sorted.
fn pod_labels(documents: &[Value]) -> Vec<(String, &Value)> {
    let mut pods: Vec<(String, &Value)> = documents
        .iter()
        .filter_map(|document| {
            let labels = match document["kind"].as_str()? {
                "Deployment" | "StatefulSet" | "NodeSet" => &document["spec"]["template"]["metadata"]["labels"],
                "Pod" => &document["metadata"]["labels"],
                _ => return None,
            };
            Some((format!("{}/{}", document["kind"].as_str()?, document["metadata"]["name"].as_str()?), labels))
        })
        .collect();
    pods.sort_by(|a, b| a.0.cmp(&b.0));
    pods
}

/// Whether a label selector (`matchLabels`, `matchExpressions` with In or Exists) selects `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let exact = selector["matchLabels"].as_object().into_iter().flatten().all(|(key, value)| &labels[key] == value);
    let expressions = selector["matchExpressions"].as_array().into_iter().flatten().all(|expression| {
        let value = &labels[expression["key"].as_str().unwrap_or_default()];
        match expression["operator"].as_str() {
            Some("Exists") => !value.is_null(),
            Some("In") => expression["values"].as_array().is_some_and(|values| values.contains(value)),
            other => panic!("operator {other:?} is not read here"),
        }
    });
    exact && expressions
}
