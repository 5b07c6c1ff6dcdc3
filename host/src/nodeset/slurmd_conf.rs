//! The node parameters a slurmd pod registers with (`slurmd -Z --conf "..."`), from its Node, its
//! container and the NodeSet.
//!
//! CPUs and RealMemory are what the pod may use: its container's limits when set, else the Node's
//! allocatable. GPUs come from `nvidia.com/gpu` (limit, else allocatable, else capacity) and the
//! Node's GPU model label. `Topology=` is left out unless it has a value: an empty one makes Slurm
//! refuse the registration (INVALID_REG, Slinky #261).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Node};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::settings::Settings;
use crate::kube::quantity;

/// The Kubernetes extended resource counted as Slurm GPUs.
const GPU_RESOURCE: &str = "nvidia.com/gpu";
/// Node labels naming the GPU model, most specific first (GPU feature discovery, then others).
const GPU_MODEL_LABELS: &[&str] = &["nvidia.com/gpu.product", "gpu.nvidia.com/class", "nvidia.com/gpu.family"];
const MAX_GPU_TYPE: usize = 32;
const MIB: u64 = 1024 * 1024;

/// The `--conf` text: `CPUs=4 RealMemory=15000 Gres=gpu:h100:8 Features=... NodeAddr=$(POD_IP) ...`.
/// `$(POD_IP)` is expanded by the kubelet from the container's `POD_IP` variable.
pub fn node_conf(node: &Node, slurmd: &Container, settings: &Settings) -> String {
    let mut parts: Vec<(String, String)> = Vec::new();
    let mut push = |key: &str, value: String| parts.push((key.to_owned(), value));
    if let Some(cpus) = amount(node, slurmd, "cpu", quantity::millicores) {
        push("CPUs", (cpus / 1000).max(1).to_string());
    }
    if let Some(bytes) = amount(node, slurmd, "memory", quantity::units) {
        push("RealMemory", (bytes / MIB).max(1).to_string());
    }
    if let Some(gres) = gres(node, slurmd) {
        push("Gres", gres);
    }
    push("Features", features(node, settings).join(","));
    push("NodeAddr", "$(POD_IP)".into());
    if let Some(topology) = topology(node, settings) {
        push("Topology", topology);
    }
    for (key, value) in &settings.extra_conf {
        parts.retain(|(ours, _)| !ours.eq_ignore_ascii_case(key));
        parts.push((key.clone(), value.clone()));
    }
    parts.iter().map(|(key, value)| format!("{key}={value}")).collect::<Vec<_>>().join(" ")
}

/// The container's limit for `resource`, else the Node's allocatable, else its capacity.
fn amount(node: &Node, slurmd: &Container, resource: &str, scale: fn(&Quantity) -> Option<u64>) -> Option<u64> {
    let limit = slurmd.resources.as_ref().and_then(|r| r.limits.as_ref()).and_then(|l| l.get(resource));
    let status = node.status.as_ref();
    let allocatable = status.and_then(|s| s.allocatable.as_ref()).and_then(|a| a.get(resource));
    let capacity = status.and_then(|s| s.capacity.as_ref()).and_then(|c| c.get(resource));
    [limit, allocatable, capacity].into_iter().flatten().find_map(scale)
}

/// The NodeSet's features, plus the Node's GPU model as its label says it (`A100`), which is what
/// the job-mapper turns a pod's GPU-model node affinity into (`--constraint A100`).
fn features(node: &Node, settings: &Settings) -> Vec<String> {
    let mut features = settings.features.clone();
    let labels = node.metadata.labels.as_ref();
    let model = GPU_MODEL_LABELS.iter().find_map(|key| labels?.get(*key));
    if let Some(model) = model.filter(|model| is_feature_name(model))
        && !features.contains(model)
    {
        features.push(model.clone());
    }
    features
}

/// A word Slurm accepts as a node feature (no operators of feature expressions, no spaces).
fn is_feature_name(value: &str) -> bool {
    !value.is_empty() && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn gres(node: &Node, slurmd: &Container) -> Option<String> {
    let count = amount(node, slurmd, GPU_RESOURCE, quantity::units).filter(|count| *count > 0)?;
    let labels = node.metadata.labels.clone().unwrap_or_default();
    Some(match gpu_type(&labels) {
        Some(model) => format!("gpu:{model}:{count}"),
        None => format!("gpu:{count}"),
    })
}

/// `NVIDIA-H100-80GB-HBM3` -> `h100`: the model number (the first word with a digit, else the first
/// word), lowercased, without the vendor. One word because slurmd's GPU detection keeps only GPUs
/// whose detected name contains the type, and the label's separators are not the name's:
/// `NVIDIA A100-SXM4-40GB` is detected as `nvidia_a100-sxm4-40gb`, its label reads
/// `NVIDIA-A100-SXM4-40GB`, and only a word without separators is in both.
fn gpu_type(labels: &BTreeMap<String, String>) -> Option<String> {
    let model = GPU_MODEL_LABELS.iter().find_map(|key| labels.get(*key)).map(|model| model.to_ascii_lowercase())?;
    let words: Vec<&str> = model
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|word| !word.is_empty() && *word != "nvidia")
        .collect();
    let word = words.iter().find(|word| word.chars().any(|c| c.is_ascii_digit())).or_else(|| words.first())?;
    Some(word[..word.len().min(MAX_GPU_TYPE)].to_owned())
}

fn topology(node: &Node, settings: &Settings) -> Option<String> {
    let spec = settings.topology.as_ref()?;
    let unit = node.metadata.labels.as_ref()?.get(&spec.label).filter(|value| !value.is_empty())?;
    Some(format!("{}:{unit}", spec.name.as_deref().unwrap_or("default")))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{NodeStatus, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::nodeset::resource::{NodeSetSpec, PodTemplate, TopologySpec};
    use crate::nodeset::settings::settings;

    fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        pairs.iter().map(|(k, v)| (k.to_string(), Quantity(v.to_string()))).collect()
    }

    fn node(labels: &[(&str, &str)], allocatable: &[(&str, &str)], capacity: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some("worker-1".into()),
                labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
                ..Default::default()
            },
            status: Some(NodeStatus {
                allocatable: Some(quantities(allocatable)),
                capacity: Some(quantities(capacity)),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn container(limits: &[(&str, &str)]) -> Container {
        Container {
            name: "slurmd".into(),
            resources: Some(ResourceRequirements { limits: Some(quantities(limits)), ..Default::default() }),
            ..Default::default()
        }
    }

    fn settings_of(spec: NodeSetSpec) -> Settings {
        let template = PodTemplate(serde_json::json!({"spec": {"containers": [{"name": "slurmd"}]}}));
        settings("gpu", &NodeSetSpec { template, ..spec }).unwrap()
    }

    #[test]
    fn uses_the_nodes_allocatable_without_limits() {
        let node = node(&[], &[("cpu", "3900m"), ("memory", "16Gi")], &[("cpu", "4"), ("memory", "17Gi")]);
        let conf = node_conf(&node, &container(&[]), &settings_of(NodeSetSpec::default()));
        assert_eq!(conf, "CPUs=3 RealMemory=16384 Features=gpu NodeAddr=$(POD_IP)");
    }

    #[test]
    fn container_limits_win_over_the_node() {
        let node = node(&[], &[("cpu", "64"), ("memory", "512Gi")], &[]);
        let conf = node_conf(&node, &container(&[("cpu", "8"), ("memory", "32Gi")]), &settings_of(Default::default()));
        assert!(conf.starts_with("CPUs=8 RealMemory=32768 "), "{conf}");
        let tiny = node_conf(&node, &container(&[("cpu", "500m")]), &settings_of(Default::default()));
        assert!(tiny.starts_with("CPUs=1 "), "{tiny}");
    }

    #[test]
    fn gres_names_the_gpu_model_when_the_node_says_it() {
        let labels = [("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3")];
        let conf = node_conf(
            &node(&labels, &[("nvidia.com/gpu", "8")], &[]),
            &container(&[]),
            &settings_of(Default::default()),
        );
        assert!(conf.starts_with("Gres=gpu:h100:8 "), "{conf}");
        let conf =
            node_conf(&node(&[], &[], &[("nvidia.com/gpu", "2")]), &container(&[]), &settings_of(Default::default()));
        assert!(conf.contains("Gres=gpu:2 "), "{conf}");
        let limited = container(&[("nvidia.com/gpu", "1")]);
        let conf = node_conf(&node(&[], &[("nvidia.com/gpu", "8")], &[]), &limited, &settings_of(Default::default()));
        assert!(conf.contains("Gres=gpu:1 "), "{conf}");
        let conf = node_conf(
            &node(&labels, &[("nvidia.com/gpu", "0")], &[]),
            &container(&[]),
            &settings_of(Default::default()),
        );
        assert!(!conf.contains("Gres"), "{conf}");
    }

    #[test]
    fn the_gpu_model_is_a_feature_too() {
        let gpu = node(&[("nvidia.com/gpu.product", "A100")], &[("cpu", "2")], &[("nvidia.com/gpu", "2")]);
        let conf = node_conf(&gpu, &container(&[]), &settings_of(NodeSetSpec::default()));
        assert!(conf.contains("Features=") && conf.contains(",A100"), "{conf}");
        let odd = node(&[("nvidia.com/gpu.product", "A100 (80GB)")], &[("cpu", "2")], &[]);
        let conf = node_conf(&odd, &container(&[]), &settings_of(NodeSetSpec::default()));
        assert!(!conf.contains("80GB"), "a label value Slurm cannot take as a feature is left out: {conf}");
    }

    #[test]
    fn gpu_types_are_the_model_number_which_detection_names_contain() {
        let of = |model: &str| gpu_type(&[("gpu.nvidia.com/class".to_string(), model.to_string())].into());
        // Each label beside the name slurmd's detection gives the same GPU (lowercased, spaces as
        // underscores), which must contain the type for slurmd to keep the GPU.
        for (label, detected, type_) in [
            ("NVIDIA-H100-80GB-HBM3", "nvidia_h100_80gb_hbm3", "h100"),
            ("NVIDIA-A100-SXM4-40GB", "nvidia_a100-sxm4-40gb", "a100"),
            ("Tesla-V100-SXM2-16GB", "tesla_v100-sxm2-16gb", "v100"),
            ("NVIDIA-GeForce-RTX-4090", "nvidia_geforce_rtx_4090", "4090"),
            ("NVIDIA-RTX-A6000", "nvidia_rtx_a6000", "a6000"),
            ("NVIDIA  L40S", "nvidia_l40s", "l40s"),
        ] {
            assert_eq!(of(label).as_deref(), Some(type_), "{label}");
            assert!(detected.contains(type_), "{detected} does not contain {type_}");
        }
        assert_eq!(of("NVIDIA-Graphics-Device").as_deref(), Some("graphics"), "no model number: the first word");
        assert_eq!(of("nvidia").as_deref(), None);
        assert_eq!(of("--").as_deref(), None);
        assert!(of(&"x1".repeat(100)).unwrap().len() <= MAX_GPU_TYPE);
    }

    #[test]
    fn features_partitions_topology_and_extra_conf() {
        let spec = NodeSetSpec {
            features: vec!["h100".into()],
            partitions: vec!["batch".into()],
            topology: Some(TopologySpec { label: "leaf".into(), name: None }),
            extra_conf: Some("Weight=10 CPUs=2".into()),
            ..Default::default()
        };
        let settings = settings_of(spec);
        let conf = node_conf(&node(&[("leaf", "s1")], &[("cpu", "4")], &[]), &container(&[]), &settings);
        assert_eq!(conf, "Features=gpu,h100,batch NodeAddr=$(POD_IP) Topology=default:s1 Weight=10 CPUs=2");
        let conf = node_conf(&node(&[("leaf", "")], &[], &[]), &container(&[]), &settings);
        assert!(!conf.contains("Topology"), "{conf}");
    }
}
