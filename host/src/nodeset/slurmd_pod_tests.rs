use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::nodeset::resource::{NodeSetSpec, NodeSetStatus, PodTemplate};
use crate::nodeset::settings::settings;

fn nodeset(template: serde_json::Value) -> NodeSet {
    NodeSet {
        metadata: ObjectMeta {
            name: Some("gpu".into()),
            namespace: Some("slurm".into()),
            uid: Some("uid-1".into()),
            ..Default::default()
        },
        spec: NodeSetSpec { template: PodTemplate(template), ..Default::default() },
        status: None,
    }
}

fn cluster() -> ClusterSettings {
    ClusterSettings { conf_server: "slurmctld:6817".into(), slurm_key_secret: "slurm-key".into() }
}

fn build_for(nodeset: &NodeSet) -> Pod {
    let settings = settings("gpu", &nodeset.spec).unwrap();
    let template_spec = settings.template.spec.clone();
    let selection = Selection::new(&Default::default(), None, &[], template_spec.as_ref());
    let placement =
        SlurmdPlacement { kube_node: "worker-1", slurm_node: "worker-1", revision: "abc", conf: "CPUs=2 Features=gpu" };
    build(nodeset, &settings, &selection, &cluster(), &placement)
}

fn simple() -> serde_json::Value {
    serde_json::json!({
        "metadata": {"labels": {"app": "slurmd"}},
        "spec": {"containers": [
            {"name": "sidecar", "image": "busybox"},
            {"name": "slurmd", "image": "localhost/sunk/slurmd:26.05", "args": ["-vv"]}
        ]}
    })
}

#[test]
fn pins_labels_and_owns_the_pod() {
    let pod = build_for(&nodeset(simple()));
    let meta = &pod.metadata;
    assert_eq!(meta.name.as_deref(), Some("gpu-worker-1"));
    assert_eq!(meta.namespace.as_deref(), Some("slurm"));
    let labels = meta.labels.as_ref().unwrap();
    assert_eq!(labels["app"], "slurmd");
    assert_eq!(labels[NODESET_LABEL], "gpu");
    assert_eq!(labels[SLURM_NODE_LABEL], "worker-1");
    assert_eq!(labels[REVISION_LABEL], "abc");
    assert_eq!(meta.annotations.as_ref().unwrap()[CONF_ANNOTATION], "CPUs=2 Features=gpu");
    let owner = &meta.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.uid.as_str(), owner.controller), ("NodeSet", "uid-1", Some(true)));
    let spec = pod.spec.unwrap();
    assert_eq!(spec.node_name.as_deref(), Some("worker-1"));
    let tolerated: Vec<_> = spec.tolerations.unwrap().into_iter().filter_map(|t| t.key).collect();
    assert!(tolerated.contains(&"node.kubernetes.io/unschedulable".to_string()));
}

#[test]
fn runs_slurmd_as_a_dynamic_node_in_the_slurmd_container() {
    let spec = build_for(&nodeset(simple())).spec.unwrap();
    assert!(spec.containers[0].args.is_none(), "the sidecar is left alone");
    let slurmd = &spec.containers[1];
    assert_eq!(slurmd.command.as_deref(), Some(&["slurmd".to_string()][..]));
    let args = slurmd.args.clone().unwrap();
    assert_eq!(
        args,
        ["-D", "-Z", "-N", "worker-1", "--conf-server", "slurmctld:6817", "--conf", "CPUs=2 Features=gpu", "-vv"]
    );
    let pod_ip = slurmd.env.as_ref().unwrap().iter().find(|v| v.name == "POD_IP").unwrap();
    let field = pod_ip.value_from.as_ref().unwrap().field_ref.as_ref().unwrap();
    assert_eq!(field.field_path, "status.podIP");
    let env = |name: &str| slurmd.env.as_ref().unwrap().iter().find(|v| v.name == name).and_then(|v| v.value.clone());
    assert_eq!(env("SLURMSTEPD_OOM_ADJ").as_deref(), Some("0"), "a job's slurmstepd outlives its tasks' OOM");
    assert_eq!(env("SLURMD_OOM_ADJ").as_deref(), Some("0"));
    let mount = slurmd.volume_mounts.as_ref().unwrap().iter().find(|m| m.mount_path == KEY_PATH).unwrap();
    assert_eq!(mount.read_only, Some(true));
    let volume = spec.volumes.unwrap().into_iter().find(|v| v.name == mount.name).unwrap();
    let secret = volume.secret.unwrap();
    assert_eq!(secret.secret_name.as_deref(), Some("slurm-key"));
    assert_eq!(secret.default_mode, Some(0o600));
}

#[test]
fn keeps_the_templates_own_command_and_key_mount() {
    let template = serde_json::json!({"spec": {
        "containers": [{"name": "main", "command": ["/entrypoint.sh"],
                        "volumeMounts": [{"name": "etc", "mountPath": "/etc/slurm/"}]}],
        "volumes": [{"name": "etc", "emptyDir": {}}]
    }});
    let spec = build_for(&nodeset(template)).spec.unwrap();
    let slurmd = &spec.containers[0];
    assert_eq!(slurmd.command.as_deref(), Some(&["/entrypoint.sh".to_string()][..]));
    assert_eq!(slurmd.args.as_ref().unwrap()[0], "-D");
    assert_eq!(slurmd.volume_mounts.as_ref().unwrap().len(), 1);
    assert_eq!(spec.volumes.unwrap().len(), 1);
}

#[test]
fn the_revision_follows_what_shapes_pods_only() {
    let base = nodeset(simple());
    let mut status_only = base.clone();
    status_only.status = Some(NodeSetStatus { desired: 3, ..Default::default() });
    status_only.spec.force = true;
    status_only.spec.drain_timeout = Some("5m".into());
    assert_eq!(revision(&base, &cluster()), revision(&status_only, &cluster()));
    let mut new_image = base.clone();
    new_image.spec.template.0["spec"]["containers"][1]["image"] = "localhost/sunk/slurmd:25.05".into();
    assert_ne!(revision(&base, &cluster()), revision(&new_image, &cluster()));
    let mut more_features = base.clone();
    more_features.spec.features.push("ib".into());
    assert_ne!(revision(&base, &cluster()), revision(&more_features, &cluster()));
    assert_eq!(revision(&base, &cluster()).len(), 10);
}

#[test]
fn under_a_subdomain_the_pods_host_name_is_its_slurm_nodes() {
    let plain = build_for(&nodeset(simple())).spec.unwrap();
    assert_eq!((plain.hostname, plain.subdomain), (None, None), "the pod's own name without a subdomain");
    let mut template = simple();
    template["spec"]["subdomain"] = "sunk-slurmd".into();
    // One host name for every pod of the NodeSet would resolve to any of them: the host's wins.
    template["spec"]["hostname"] = "slurmd".into();
    let spec = build_for(&nodeset(template)).spec.unwrap();
    assert_eq!(spec.hostname.as_deref(), Some("worker-1"), "<slurm node>.sunk-slurmd resolves to the pod");
    assert_eq!(spec.subdomain.as_deref(), Some("sunk-slurmd"));
    let mut empty = simple();
    empty["spec"]["subdomain"] = "".into();
    assert_eq!(build_for(&nodeset(empty)).spec.unwrap().hostname, None, "an empty subdomain is none");
}

#[test]
fn a_slurmd_pod_gets_no_api_token_unless_its_template_asks_for_one() {
    let spec = build_for(&nodeset(simple())).spec.unwrap();
    assert_eq!(spec.automount_service_account_token, Some(false), "Slurm jobs run in this pod");
    let asking =
        serde_json::json!({"spec": {"automountServiceAccountToken": true, "containers": [{"name": "slurmd"}]}});
    assert_eq!(build_for(&nodeset(asking)).spec.unwrap().automount_service_account_token, Some(true));
}

#[test]
fn slurmd_requests_only_the_cpu_and_memory_its_template_asks_for() {
    let template = |resources: serde_json::Value| serde_json::json!({"spec": {"containers": [{"name": "slurmd", "image": "slurmd", "resources": resources}]}});
    let requests = |resources| {
        let pod = build_for(&nodeset(template(resources)));
        let slurmd = slurmd_container(pod.spec.as_ref().unwrap()).unwrap().clone();
        let requests = slurmd.resources.and_then(|resources| resources.requests).unwrap_or_default();
        requests.into_iter().map(|(name, amount)| (name, amount.0)).collect::<BTreeMap<_, _>>()
    };
    let of = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    // (resources, requests)
    let cases = [
        (serde_json::json!({}), of(&[])),
        (serde_json::json!({"limits": {"cpu": "2", "memory": "4Gi"}}), of(&[("cpu", "0"), ("memory", "0")])),
        (
            serde_json::json!({"limits": {"cpu": "2", "memory": "4Gi"}, "requests": {"cpu": "100m"}}),
            of(&[("cpu", "100m"), ("memory", "0")]),
        ),
        (serde_json::json!({"requests": {"memory": "64Mi"}}), of(&[("memory", "64Mi")])),
    ];
    for (resources, expected) in cases {
        assert_eq!(requests(resources.clone()), expected, "{resources}");
    }
}
