//! The PersistentVolumeClaims, PersistentVolumes and StorageClasses the scheduler reads, watched when
//! the operator lets it (`--volume-topology`): where a pod's claimed volumes can be mounted
//! (`volume_topology`). Claims are read in the scheduler's namespaces only, as its pods are; volumes
//! and classes are cluster-wide.

use std::sync::Arc;

use futures::StreamExt;
use futures::channel::mpsc::UnboundedSender;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};

use super::volume_topology::{self, Claims};
use crate::scheduler::scope::Scope;
use crate::scheduler::watched_pod::WatchedPod;

/// The watched claims, volumes and classes; shared, cheaply cloned.
#[derive(Clone)]
pub struct VolumeStores {
    claims: Store<PersistentVolumeClaim>,
    volumes: Store<PersistentVolume>,
    classes: Store<StorageClass>,
}

impl Claims for VolumeStores {
    fn claim(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
        self.claims.get(&ObjectRef::new(name).within(namespace))
    }
    fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.volumes.get(&ObjectRef::new(name))
    }
    fn class(&self, name: &str) -> Option<Arc<StorageClass>> {
        self.classes.get(&ObjectRef::new(name))
    }
}

impl VolumeStores {
    pub fn new(
        claims: Store<PersistentVolumeClaim>,
        volumes: Store<PersistentVolume>,
        classes: Store<StorageClass>,
    ) -> Self {
        Self { claims, volumes, classes }
    }

    /// Watched from now on. A claim or volume that changes brings back at once the unbound pods of
    /// `pods` that mount the claim: a pod waiting for its claim to be bound need not wait for its
    /// routine recheck.
    pub fn watch(
        client: &Client,
        scope: &Scope,
        pods: Store<WatchedPod>,
        decide_again: UnboundedSender<ObjectRef<WatchedPod>>,
    ) -> Self {
        let (claims, claims_writer) = reflector::store();
        let (volumes, volumes_writer) = reflector::store();
        let (classes, classes_writer) = reflector::store();
        let waiting = Waiting { pods, decide_again };

        let claims_watch = scope.watch::<PersistentVolumeClaim>(client.clone(), watcher::Config::default());
        let claims_seen = waiting.clone();
        tokio::spawn(claims_watch.modify(forget_managed_fields).reflect(claims_writer).applied_objects().for_each(
            move |claim| {
                if let Ok(claim) = claim {
                    claims_seen.bring_back(&claim.namespace().unwrap_or_default(), &claim.name_any());
                }
                std::future::ready(())
            },
        ));
        let volumes_watch = watcher(Api::<PersistentVolume>::all(client.clone()), watcher::Config::default());
        let volumes_watch = volumes_watch.default_backoff().modify(forget_managed_fields).reflect(volumes_writer);
        // A claim may be seen bound before its new volume is: the volume's arrival brings the pod back too.
        tokio::spawn(volumes_watch.applied_objects().for_each(move |volume| {
            let claim = volume.ok().and_then(|volume| volume.spec?.claim_ref);
            if let Some(claim) = claim {
                waiting.bring_back(
                    claim.namespace.as_deref().unwrap_or_default(),
                    claim.name.as_deref().unwrap_or_default(),
                );
            }
            std::future::ready(())
        }));
        let classes_watch = watcher(Api::<StorageClass>::all(client.clone()), watcher::Config::default());
        let classes_watch = classes_watch.default_backoff().modify(forget_managed_fields).reflect(classes_writer);
        tokio::spawn(classes_watch.for_each(|_| std::future::ready(())));
        Self { claims, volumes, classes }
    }

    /// Waits for the first listing of each: until then a claim not listed would read as missing.
    pub async fn wait_until_ready(&self) -> anyhow::Result<()> {
        let ended = |what: &str| anyhow::anyhow!("the watch of {what} ended");
        self.claims.wait_until_ready().await.map_err(|_| ended("PersistentVolumeClaims"))?;
        self.volumes.wait_until_ready().await.map_err(|_| ended("PersistentVolumes"))?;
        self.classes.wait_until_ready().await.map_err(|_| ended("StorageClasses"))
    }
}

/// The scheduler's pods, and how to have one looked at again.
#[derive(Clone)]
struct Waiting {
    pods: Store<WatchedPod>,
    decide_again: UnboundedSender<ObjectRef<WatchedPod>>,
}

impl Waiting {
    /// Has every unbound pod of `namespace` that mounts claim `name` looked at again.
    fn bring_back(&self, namespace: &str, name: &str) {
        let mounting = |pod: &WatchedPod| {
            pod.metadata.namespace.as_deref() == Some(namespace)
                && pod.spec.as_ref().is_some_and(|spec| spec.node_name.is_none())
                && volume_topology::mounts(pod, name)
        };
        for pod in self.pods.state().iter().filter(|pod| mounting(pod)) {
            let _ = self.decide_again.unbounded_send(ObjectRef::from_obj(pod.as_ref()));
        }
    }
}

/// Nothing reads the managed fields: not kept.
fn forget_managed_fields<K: ResourceExt>(object: &mut K) {
    object.managed_fields_mut().clear();
}

#[cfg(test)]
mod tests {
    use futures::channel::mpsc;
    use kube::runtime::watcher::Event;
    use serde_json::json;

    use super::*;

    #[test]
    fn a_claim_brings_back_only_the_unbound_pods_of_its_namespace_that_mount_it() {
        let (pods, mut writer) = reflector::store::<WatchedPod>();
        let mut pod = |name: &str, namespace: &str, claim: &str, node: Option<&str>| {
            let volume = json!({"name": "v", "persistentVolumeClaim": {"claimName": claim}});
            let json = json!({"metadata": {"name": name, "namespace": namespace},
                              "spec": {"nodeName": node, "volumes": [volume]}});
            writer.apply_watcher_event(&Event::Apply(serde_json::from_value(json).unwrap()));
        };
        pod("waiting", "ml", "data", None);
        pod("bound", "ml", "data", Some("kube-node-1"));
        pod("elsewhere", "web", "data", None);
        pod("other-claim", "ml", "logs", None);
        let (decide_again, mut asked) = mpsc::unbounded();
        Waiting { pods, decide_again }.bring_back("ml", "data");
        let mut names = Vec::new();
        while let Ok(pod) = asked.try_recv() {
            names.push(pod.name);
        }
        assert_eq!(names, ["waiting"]);
    }
}
