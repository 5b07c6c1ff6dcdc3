//! Which pod group a pod belongs to, and how many members the group needs.
//!
//! - `sunk.dev/pod-group: <name>` with `sunk.dev/pod-group-size: "<n>"` (a label or an annotation);
//! - `scheduling.x-k8s.io/pod-group: <name>` of the coscheduling plugin: the size is the PodGroup's
//!   `spec.minMember` when a PodGroup of that name exists (scheduling.x-k8s.io/v1alpha1), else
//!   `sunk.dev/pod-group-size` as above.

use crate::scheduler::watched_pod::WatchedPod;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::{Client, ResourceExt};

pub use crate::vocabulary::{COSCHEDULING_POD_GROUP_LABEL, POD_GROUP_LABEL, POD_GROUP_SIZE};
/// The most members one gang may have (one Slurm node each).
pub const MAX_SIZE: u32 = 1024;

/// The group a pod names, by its label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub name: String,
    /// The label that named it.
    pub label: &'static str,
}

/// The group a pod belongs to, if any (`sunk.dev/pod-group` wins over the coscheduling label).
pub fn group_of(pod: &WatchedPod) -> Option<Group> {
    let labels = pod.labels();
    [POD_GROUP_LABEL, COSCHEDULING_POD_GROUP_LABEL].into_iter().find_map(|label| {
        labels.get(label).filter(|name| !name.is_empty()).map(|name| Group { name: name.clone(), label })
    })
}

/// The size the pod's own label or annotation gives, or what is wrong with it.
pub fn size_on_pod(pod: &WatchedPod) -> Result<u32, String> {
    let value = pod.labels().get(POD_GROUP_SIZE).or_else(|| pod.annotations().get(POD_GROUP_SIZE));
    let Some(value) = value else {
        return Err(format!(
            "{POD_GROUP_SIZE} is missing: set it (as a label or an annotation) to the number of pods in the group"
        ));
    };
    value
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|size| (1..=MAX_SIZE).contains(size))
        .ok_or_else(|| format!("{POD_GROUP_SIZE} is {value:?}: it must be a whole number from 1 to {MAX_SIZE}"))
}

/// The group's size: the coscheduling PodGroup's `minMember` when there is one, else the pod's own.
pub async fn size(client: &Client, pod: &WatchedPod, group: &Group) -> Result<u32, String> {
    if group.label == COSCHEDULING_POD_GROUP_LABEL
        && let Some(min_member) = pod_group_min_member(client, &pod.namespace().unwrap_or_default(), &group.name).await
    {
        return u32::try_from(min_member)
            .ok()
            .filter(|size| (1..=MAX_SIZE).contains(size))
            .ok_or_else(|| format!("PodGroup {}: minMember {min_member} must be from 1 to {MAX_SIZE}", group.name));
    }
    size_on_pod(pod)
}

/// `spec.minMember` of the PodGroup, when the CRD is installed and the PodGroup exists.
async fn pod_group_min_member(client: &Client, namespace: &str, name: &str) -> Option<i64> {
    let resource = ApiResource {
        group: "scheduling.x-k8s.io".into(),
        version: "v1alpha1".into(),
        api_version: "scheduling.x-k8s.io/v1alpha1".into(),
        kind: "PodGroup".into(),
        plural: "podgroups".into(),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    // No CRD and no PodGroup are both a 404: the pod's own size label applies.
    let pod_group = match api.get_opt(name).await {
        Ok(pod_group) => pod_group?,
        Err(error) => {
            // e.g. 403 without the chart's RBAC: the size label still works, but say why minMember is not read.
            tracing::warn!(namespace, pod_group = name, %error, "cannot read the PodGroup; using the pod's size label");
            return None;
        }
    };
    pod_group.data.get("spec")?.get("minMember")?.as_i64()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(labels: serde_json::Value, annotations: serde_json::Value) -> WatchedPod {
        serde_json::from_value(
            serde_json::json!({"metadata": {"name": "p", "labels": labels, "annotations": annotations}}),
        )
        .unwrap()
    }

    #[test]
    fn the_sunk_label_wins_over_the_coscheduling_one() {
        let both =
            pod(serde_json::json!({POD_GROUP_LABEL: "a", COSCHEDULING_POD_GROUP_LABEL: "b"}), serde_json::json!({}));
        assert_eq!(group_of(&both), Some(Group { name: "a".into(), label: POD_GROUP_LABEL }));
        let cosched = pod(serde_json::json!({COSCHEDULING_POD_GROUP_LABEL: "b"}), serde_json::json!({}));
        assert_eq!(group_of(&cosched).unwrap().label, COSCHEDULING_POD_GROUP_LABEL);
        assert_eq!(group_of(&pod(serde_json::json!({}), serde_json::json!({}))), None);
    }

    #[test]
    fn the_size_comes_from_a_label_or_an_annotation() {
        assert_eq!(size_on_pod(&pod(serde_json::json!({POD_GROUP_SIZE: "2"}), serde_json::json!({}))), Ok(2));
        assert_eq!(size_on_pod(&pod(serde_json::json!({}), serde_json::json!({POD_GROUP_SIZE: " 3 "}))), Ok(3));
        for bad in ["0", "two", "-1", "5000"] {
            let error = size_on_pod(&pod(serde_json::json!({POD_GROUP_SIZE: bad}), serde_json::json!({}))).unwrap_err();
            assert!(error.contains(POD_GROUP_SIZE), "{error}");
        }
        assert!(size_on_pod(&pod(serde_json::json!({}), serde_json::json!({}))).unwrap_err().contains("missing"));
    }
}
