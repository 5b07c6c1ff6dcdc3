//! The slurmd pod of one Node, built from the NodeSet's template.
//!
//! The pod is pinned with `nodeName` (it can only ever run on its Node, and no scheduler, sunk's
//! included, should look at it). Its slurmd runs as a dynamic node:
//! `slurmd -D -Z -N <slurm node> --conf-server <slurmctld> --conf "<node conf>"`, configless, with
//! the cluster's key from a Secret at `/etc/slurm/slurm.key`. A template with a `subdomain` gets
//! the Slurm node's name as the pod's `hostname`, so that the node's name resolves to its pod.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, KeyToPath, ObjectFieldSelector, Pod, PodSpec, SecretVolumeSource, Volume,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::naming::{CONF_ANNOTATION, NODESET_LABEL, REVISION_LABEL, SLURM_NODE_LABEL, pod_name, short_hash};
use super::resource::NodeSet;
use super::selection::Selection;
use super::settings::Settings;

/// Container that runs slurmd when the template has several.
pub const SLURMD_CONTAINER: &str = "slurmd";
const KEY_VOLUME: &str = "sunk-slurm-key";
const KEY_PATH: &str = "/etc/slurm/slurm.key";
const KEY_FILE: &str = "slurm.key";
const POD_IP: &str = "POD_IP";
/// slurmd's and each job's slurmstepd's out-of-memory score. A slurmstepd sits in its job's memory
/// cgroup and would otherwise keep the pod's score (1000 for a pod without requests): a job over
/// its `--mem` would lose its slurmstepd before its own processes, and stay RUNNING with nothing
/// left to end it. At 0, the score Slurm gives the job's tasks too, the kernel picks the largest
/// process, a task; lower needs CAP_SYS_RESOURCE, which a container may lack.
const OOM_SCORE_ADJ: [(&str, &str); 2] = [("SLURMD_OOM_ADJ", "0"), ("SLURMSTEPD_OOM_ADJ", "0")];

/// What the host itself knows about the Slurm cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    /// slurmctld's `host:port`, for `--conf-server`.
    pub conf_server: String,
    /// Secret holding `slurm.key`, for NodeSets that name none.
    pub slurm_key_secret: String,
}

/// The slurmd container: the one named `slurmd`, else the first.
pub fn slurmd_container(spec: &PodSpec) -> Option<&Container> {
    spec.containers.iter().find(|c| c.name == SLURMD_CONTAINER).or_else(|| spec.containers.first())
}

fn slurmd_container_mut(spec: &mut PodSpec) -> Option<&mut Container> {
    let index = spec.containers.iter().position(|c| c.name == SLURMD_CONTAINER).unwrap_or(0);
    spec.containers.get_mut(index)
}

/// A hash of everything in the NodeSet (and host) that shapes its pods; a pod built from another
/// revision is replaced.
pub fn revision(nodeset: &NodeSet, cluster: &ClusterSettings) -> String {
    let spec = &nodeset.spec;
    let shaping = json!({
        "template": spec.template,
        "features": spec.features,
        "partitions": spec.partitions,
        "extraConf": spec.extra_conf,
        "topology": spec.topology,
        "slurmKeySecret": spec.slurm_key_secret.as_deref().unwrap_or(&cluster.slurm_key_secret),
        "confServer": cluster.conf_server,
    });
    short_hash(shaping.to_string().as_bytes())[..10].to_owned()
}

/// Where a pod goes and what it registers as.
pub struct SlurmdPlacement<'a> {
    pub kube_node: &'a str,
    pub slurm_node: &'a str,
    pub revision: &'a str,
    pub conf: &'a str,
}

/// The pod for `placement`. Settings are validated, so the template has a slurmd container.
pub fn build(
    nodeset: &NodeSet,
    settings: &Settings,
    selection: &Selection,
    cluster: &ClusterSettings,
    placement: &SlurmdPlacement,
) -> Pod {
    let template = settings.template.clone();
    let template_meta = template.metadata.unwrap_or_default();
    let mut labels: BTreeMap<String, String> = template_meta.labels.unwrap_or_default();
    labels.insert(NODESET_LABEL.into(), nodeset.name_any());
    labels.insert(SLURM_NODE_LABEL.into(), placement.slurm_node.into());
    labels.insert(REVISION_LABEL.into(), placement.revision.into());
    let mut annotations = template_meta.annotations.unwrap_or_default();
    annotations.insert(CONF_ANNOTATION.into(), placement.conf.into());

    let mut spec = template.spec.unwrap_or_default();
    spec.node_name = Some(placement.kube_node.into());
    // Under a subdomain (a headless Service of that name over the slurmd pods), each pod is its Slurm
    // node by name too: `<slurm node>.<subdomain>.<namespace>.svc` resolves to it, for MPI and users'
    // code. A Slurm node name is always a DNS label (naming.rs).
    if spec.subdomain.as_deref().is_some_and(|subdomain| !subdomain.is_empty()) {
        spec.hostname = Some(placement.slurm_node.into());
    }
    // Slurm jobs run in the slurmd container: no API token for them unless the template asks for one.
    spec.automount_service_account_token.get_or_insert(false);
    spec.tolerations = Some(selection.tolerations().to_vec());
    let secret = settings.slurm_key_secret.clone().unwrap_or_else(|| cluster.slurm_key_secret.clone());
    let key_mounted = if let Some(slurmd) = slurmd_container_mut(&mut spec) {
        configure_slurmd(slurmd, cluster, placement)
    } else {
        true
    };
    if !key_mounted {
        spec.volumes.get_or_insert_default().push(key_volume(secret));
    }

    Pod {
        metadata: ObjectMeta {
            name: Some(pod_name(&nodeset.name_any(), placement.slurm_node)),
            namespace: nodeset.namespace(),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: nodeset.controller_owner_ref(&()).map(|owner| vec![owner]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// Sets slurmd's command line, `POD_IP` and the daemons' out-of-memory scores (unless the template
/// sets them); returns whether the template mounts the key itself.
fn configure_slurmd(slurmd: &mut Container, cluster: &ClusterSettings, placement: &SlurmdPlacement) -> bool {
    if slurmd.command.as_ref().is_none_or(Vec::is_empty) {
        slurmd.command = Some(vec!["slurmd".into()]);
    }
    let mut args: Vec<String> =
        ["-D", "-Z", "-N", placement.slurm_node, "--conf-server", &cluster.conf_server, "--conf", placement.conf]
            .map(str::to_owned)
            .to_vec();
    args.extend(slurmd.args.take().unwrap_or_default());
    slurmd.args = Some(args);
    request_only_what_is_asked(slurmd);
    let env = slurmd.env.get_or_insert_default();
    if !env.iter().any(|var| var.name == POD_IP) {
        env.push(EnvVar {
            name: POD_IP.into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector { field_path: "status.podIP".into(), ..Default::default() }),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    for (name, value) in OOM_SCORE_ADJ {
        if !env.iter().any(|var| var.name == name) {
            env.push(EnvVar { name: name.into(), value: Some(value.into()), ..Default::default() });
        }
    }
    let mounts = slurmd.volume_mounts.get_or_insert_default();
    let mounted = mounts.iter().any(|m| m.mount_path.trim_end_matches('/') == "/etc/slurm" || m.mount_path == KEY_PATH);
    if !mounted {
        mounts.push(VolumeMount {
            name: KEY_VOLUME.into(),
            mount_path: KEY_PATH.into(),
            sub_path: Some(KEY_FILE.into()),
            read_only: Some(true),
            ..Default::default()
        });
    }
    mounted
}

/// The slurmd container's limits tell Slurm what its node has (`slurmd_conf`), and Kubernetes would
/// make them its requests too: the kubelet would then hold for the slurmd pod the CPUs and memory
/// Slurm gives sunk's pods beside it, and refuse those pods. It requests the CPU and memory its
/// template asks for, else none. (A GPU limit is its request whatever it says: GPUs belong in the
/// Node's allocatable, not in the slurmd container's limits.)
fn request_only_what_is_asked(slurmd: &mut Container) {
    let Some(resources) = slurmd.resources.as_mut() else { return };
    let Some(limits) = &resources.limits else { return };
    let limited: Vec<&str> = ["cpu", "memory"].into_iter().filter(|name| limits.contains_key(*name)).collect();
    let requests = resources.requests.get_or_insert_default();
    for name in limited {
        requests.entry(name.to_owned()).or_insert_with(|| Quantity("0".into()));
    }
}

fn key_volume(secret: String) -> Volume {
    Volume {
        name: KEY_VOLUME.into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret),
            items: Some(vec![KeyToPath { key: KEY_FILE.into(), path: KEY_FILE.into(), mode: None }]),
            default_mode: Some(0o600),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
#[path = "slurmd_pod_tests.rs"]
mod tests;
