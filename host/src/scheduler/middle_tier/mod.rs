//! The middle tier of the scheduler's tests: the real reconcile (observe -> decide -> act) against an
//! in-memory Slurm ([`FakeSlurm`]) and a fake API server ([`FakeApi`]), in milliseconds. A [`World`]
//! is the demo's shape: Slurm nodes `slurm-1` and `slurm-2` (2 CPUs each) whose slurmd pods run on
//! Kubernetes Nodes `kube-node-1` and `-2`. A test creates pods, lets the host pass over them until
//! nothing changes, plays Slurm's part (a job finishes, slurmrestd goes away) and reads the outcome
//! as a user would: where a pod is bound, what its `PodScheduled` condition says, which jobs Slurm
//! holds. The end-to-end suite checks the same against the real parts.

mod gangs;
mod grants;
mod impostors;
mod placement;
mod pods;
mod volumes;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::channel::mpsc;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, ObjectRef, store::Writer};
use kube::runtime::watcher;
use serde_json::json;

use super::context::Context;
use super::link::{Installation, PodKey};
use super::placeholder::{self, PlaceholderKind};
use super::placement::volume_stores::VolumeStores;
use super::timing::RECHECK;
use super::watched_pod::WatchedPod;
use super::{Placeholders, Placement, SchedulerMetrics, SlurmdPods, batch, gang, mapping, preemption, reconcile};
use crate::kube::PodWriter;
use crate::kube::fake_api::FakeApi;
use crate::nodeset::SlurmNodeOwner;
use crate::policy::{self, FailureModes, Policies};
use crate::slurm::{FakeSlurm, Job, NodeCache, NodeCacheConfig, NodeUpdate, Slurm};
use crate::tenancy::Tenancy;
use crate::vocabulary::SLURM_NODE_LABEL;

const SCHEDULER: &str = "sunk";

/// The slurmd pod of Slurm node `slurm-<n>` on `kube-node-<n>`, as NodeSet `slurm/gpu` makes it.
fn slurmd_pod(n: usize) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": format!("slurmd-{n}"), "namespace": "slurm", "uid": format!("slurmd-{n}"),
                     "labels": {SLURM_NODE_LABEL: format!("slurm-{n}")},
                     "ownerReferences": [{"apiVersion": "sunk.dev/v1alpha1", "kind": "NodeSet", "name": "gpu",
                                          "uid": "gpu", "controller": true}]},
        "spec": {"nodeName": format!("kube-node-{n}"), "containers": []},
    }))
    .expect("a slurmd pod")
}
pub const NAMESPACE: &str = "ml";

/// A Node's JSON, labelled with its hostname as every kubelet labels it.
fn kube_node_json(name: &str, taints: serde_json::Value) -> serde_json::Value {
    json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}, "spec": {"taints": taints}})
}

/// Passes over every pod at most this often before a test gives up on the world settling.
const MOST_ROUNDS: usize = 20;

pub struct World {
    pub slurm: Arc<FakeSlurm>,
    pub api: FakeApi,
    ctx: Arc<Context>,
    pods: Writer<WatchedPod>,
    /// The Nodes the host watches.
    nodes: Writer<Node>,
    /// The slurmd pods the host watches.
    slurmd_pods: Writer<Pod>,
    /// The namespaces whose labels the host has listed (none until a test lists one).
    namespaces: Writer<PartialObjectMeta<Namespace>>,
    /// The claims, volumes and classes the host watches.
    claims: Writer<PersistentVolumeClaim>,
    volumes: Writer<PersistentVolume>,
    classes: Writer<StorageClass>,
    /// Pods the host asked to look at again (a group's other members).
    decide_again: mpsc::UnboundedReceiver<ObjectRef<WatchedPod>>,
    /// Each pod as it was when last passed over.
    last_passed: BTreeMap<String, String>,
    /// Pods to pass over next round: their pass asked to look again soon, or failed.
    due_soon: BTreeSet<String>,
}

impl World {
    /// A world whose namespace is granted nothing (a fresh installation).
    pub async fn new() -> Self {
        Self::granted(Tenancy::default()).await
    }

    /// A world whose namespaces get what `tenancy` grants.
    pub async fn granted(tenancy: Tenancy) -> Self {
        Self::build(tenancy, false).await
    }

    /// A granted world whose pods are first tried as immediate allocations, as the chart installs
    /// the host: a grant's pods allocated as its user, their links sealed.
    pub async fn fast(tenancy: Tenancy) -> Self {
        Self::build(tenancy, true).await
    }

    async fn build(tenancy: Tenancy, fast_path: bool) -> Self {
        let installation = Installation::new("sunk", "test-cluster");
        let installation = if fast_path { installation.sealing_with(b"middle-tier") } else { installation };
        let slurm = Arc::new(FakeSlurm::with_nodes("slurm", 2, 2));
        let api = FakeApi::default();
        let client = api.client();

        let (nodes, mut nodes_writer) = reflector::store::<Node>();
        let (slurmd, mut slurmd_writer) = reflector::store::<Pod>();
        for n in 1..=2 {
            let node: Node = serde_json::from_value(kube_node_json(&format!("kube-node-{n}"), json!([]))).unwrap();
            nodes_writer.apply_watcher_event(&watcher::Event::Apply(node));
            slurmd_writer.apply_watcher_event(&watcher::Event::Apply(slurmd_pod(n)));
            // As the NodeSet controller records each slurmd pod on its Slurm node.
            let recorded = SlurmNodeOwner {
                namespace: "slurm".into(),
                pod: format!("slurmd-{n}"),
                node: format!("kube-node-{n}"),
                nodeset: "gpu".into(),
                uid: format!("slurmd-{n}"),
                nodeset_uid: "gpu".into(),
            };
            let update = NodeUpdate::comment(&recorded.to_comment());
            slurm.update_node(&format!("slurm-{n}"), &update).await.expect("a comment on a known node");
        }
        let slurm_nodes = NodeCache::new(NodeCacheConfig::every(std::time::Duration::from_millis(100)));
        let slurmd = SlurmdPods::new(slurmd, slurm_nodes.clone());
        let (pods, pods_writer) = reflector::store::<WatchedPod>();
        let (namespaces, namespaces_writer) = reflector::store();
        let (decide_again, decide_again_rx) = mpsc::unbounded();
        let (claims, claims_writer) = reflector::store();
        let (volumes, volumes_writer) = reflector::store();
        let (classes, classes_writer) = reflector::store();
        let ctx = Context {
            writer: PodWriter::new(client.clone(), SCHEDULER),
            client,
            pods,
            gang_locks: gang::locks::GroupLocks::default(),
            slurm: slurm.clone(),
            jobs: super::JobCache::new(installation.clone()),
            policies: Arc::new(Policies::bundled(FailureModes::default()).expect("the bundled policies")),
            grants: super::Grants::new(Arc::new(tenancy), Some(namespaces)),
            slurmd: slurmd.clone(),
            placement: Placement::new(nodes, slurmd, slurm_nodes),
            placement_checks: Default::default(),
            cluster: policy::Cluster {
                partitions: vec!["batch".into()],
                default_partition: Some("batch".into()),
                default_account: None,
                // Above the 30 s a pod gets by default, as the job-mapper requires.
                kill_wait_seconds: 60,
            },
            metrics: SchedulerMetrics::default(),
            fast_path,
            placeholders: Placeholders::Batch,
            quiet_after_queueing: std::time::Duration::ZERO,
            batches: batch::Batches::new(1, installation.clone()),
            installation,
            preemption: false,
            preemptions: preemption::InFlight::default(),
            requeued_seen: preemption::by_slurm::FirstSeen::default(),
            slurm_rules: preemption::KnownRules::default(),
            decide_again,
            bound_pods: None,
            refusers: Default::default(),
            assumed: Default::default(),
            volumes: Some(VolumeStores::new(claims, volumes, classes)),
        };
        let world = Self {
            slurm,
            api,
            ctx: Arc::new(ctx),
            pods: pods_writer,
            nodes: nodes_writer,
            slurmd_pods: slurmd_writer,
            namespaces: namespaces_writer,
            claims: claims_writer,
            volumes: volumes_writer,
            classes: classes_writer,
            decide_again: decide_again_rx,
            last_passed: BTreeMap::new(),
            due_soon: BTreeSet::new(),
        };
        world.observe_slurm().await;
        world
    }

    /// A user's pod claiming to host `slurm_node` on `kube_node`: labelled like a slurmd pod, owned
    /// by nothing the host made.
    pub fn impostor(&mut self, name: &str, slurm_node: &str, kube_node: &str) {
        let pod = json!({
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": format!("uid-{name}"),
                         "labels": {SLURM_NODE_LABEL: slurm_node}},
            "spec": {"nodeName": kube_node, "containers": []},
        });
        self.slurmd_pods.apply_watcher_event(&watcher::Event::Apply(serde_json::from_value(pod).expect("a pod")));
        self.ctx.placement.saw_change();
    }

    /// The host runs with `--volume-topology=false`: it reads no claims.
    pub fn without_volume_topology(&mut self) {
        Arc::get_mut(&mut self.ctx).expect("no pass under way").volumes = None;
    }

    /// A claim of the pods' namespace (`spec` as given), as the host's watch lists it; one naming a
    /// volume is bound to it, as the PersistentVolume controller marks it.
    pub fn claim(&mut self, name: &str, spec: serde_json::Value) {
        let bound = spec.get("volumeName").map(|_| json!({"pv.kubernetes.io/bind-completed": "yes"}));
        let claim = json!({"metadata": {"name": name, "namespace": NAMESPACE, "annotations": bound}, "spec": spec});
        self.claims.apply_watcher_event(&watcher::Event::Apply(serde_json::from_value(claim).expect("a claim")));
    }

    /// A PersistentVolume only `kube_node` can mount (any Node when `None`), as the host's watch lists it.
    pub fn volume(&mut self, name: &str, kube_node: Option<&str>) {
        let affinity = kube_node.map(|node| {
            let on_node = json!({"key": "kubernetes.io/hostname", "operator": "In", "values": [node]});
            json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [on_node]}]}})
        });
        let volume = json!({"metadata": {"name": name}, "spec": {"nodeAffinity": affinity}});
        self.volumes.apply_watcher_event(&watcher::Event::Apply(serde_json::from_value(volume).expect("a volume")));
    }

    /// A StorageClass binding its claims `mode` (`Immediate`, `WaitForFirstConsumer`).
    pub fn storage_class(&mut self, name: &str, mode: &str) {
        let class = json!({"metadata": {"name": name}, "provisioner": "example.com/disk", "volumeBindingMode": mode});
        self.classes.apply_watcher_event(&watcher::Event::Apply(serde_json::from_value(class).expect("a class")));
    }

    /// The pods' namespace, listed by the host with these labels.
    pub fn list_namespace(&mut self, labels: serde_json::Value) {
        let namespace = json!({"apiVersion": "v1", "kind": "PartialObjectMetadata",
                               "metadata": {"name": NAMESPACE, "labels": labels}});
        let namespace = serde_json::from_value(namespace).expect("a namespace");
        self.namespaces.apply_watcher_event(&watcher::Event::Apply(namespace));
    }

    /// The Node's owner taints it (`NoSchedule`); the host's watch sees it at once.
    pub fn taint(&mut self, kube_node: &str, key: &str) {
        let node = kube_node_json(kube_node, json!([{"key": key, "effect": "NoSchedule"}]));
        let node = serde_json::from_value(node).expect("a Node");
        self.nodes.apply_watcher_event(&watcher::Event::Apply(node));
        self.ctx.placement.saw_change();
    }

    /// The slurmd pod of Slurm node `slurm-<n>` is deleted (its Node and the Slurm node stay).
    pub fn lose_slurmd(&mut self, n: usize) {
        self.slurmd_pods.apply_watcher_event(&watcher::Event::Delete(slurmd_pod(n)));
        self.ctx.placement.saw_change();
    }

    /// How many decisions the job-mapper has made.
    pub fn job_mapper_decisions(&self) -> u64 {
        self.ctx.policies.metrics.decisions("job-mapper")
    }

    /// The minute passes: every pod is passed over again, as its routine recheck ([`RECHECK`]) would.
    pub async fn recheck(&mut self) {
        self.due_soon.extend(self.pod_names());
        self.round().await;
    }

    /// The names of every pod the API server has.
    fn pod_names(&self) -> impl Iterator<Item = String> + use<> {
        self.api.pods().into_iter().filter_map(|pod| pod.metadata.name)
    }

    /// The host's caches catch up with Slurm, as its polls would.
    async fn observe_slurm(&self) {
        // Unreachable is one of the things a test plays: the caches then keep what they had.
        let _ = self.ctx.placement.slurm_nodes.poll_once(self.slurm.as_ref()).await;
        let _ = self.ctx.jobs.refresh(self.slurm.as_ref()).await;
    }

    /// A pod naming sunk, asking for `cpus`, created by its owner.
    pub fn create(&mut self, name: &str, cpus: &str, labels: serde_json::Value, annotations: serde_json::Value) {
        let pod = json!({
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": format!("uid-{name}"),
                         "labels": labels, "annotations": annotations},
            "spec": {"schedulerName": SCHEDULER, "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpus, "memory": "64Mi"}}}
            ]},
        });
        self.api.put_pod(serde_json::from_value(pod).expect("a pod"));
    }

    /// A pod naming sunk, asking for one CPU and mounting `claim`, created by its owner.
    pub fn create_mounting(&mut self, name: &str, claim: &str) {
        self.create(name, "1", json!({}), json!({}));
        let mut pod = self.pod(name).expect("the pod just created");
        let volume = json!({"name": "data", "persistentVolumeClaim": {"claimName": claim}});
        pod.spec.as_mut().expect("a spec").volumes = Some(vec![serde_json::from_value(volume).expect("a volume")]);
        self.api.put_pod(pod);
    }

    /// Pods `names`, created already, arrive in one burst: the host submits them as one job array,
    /// task `i` for `names[i]`, as its batches do while a submission is in flight (the World passes
    /// over one pod at a time, so never forms one itself). Returns the array's id.
    pub async fn submit_as_one_array(&mut self, names: &[&str]) -> u32 {
        let mut members = Vec::new();
        for name in names {
            let pod = WatchedPod::from(&self.pod(name).expect("a created pod"));
            let key = PodKey { namespace: NAMESPACE.into(), name: name.to_string(), uid: format!("uid-{name}") };
            let Ok(request) = mapping::map(&pod, &self.ctx).await else {
                panic!("pod {name} is not mapped to a job");
            };
            let installation = &self.ctx.installation;
            members
                .push((key.clone(), placeholder::job_description(&key, request, PlaceholderKind::Batch, installation)));
        }
        let array = batch::array_description(&members, &self.ctx.installation).expect("pods to submit");
        self.slurm.submit(&array).await.expect("the fake takes the array")
    }

    /// The owner deletes the pod; it stays, leaving, until the host lets it go (no finalizer here:
    /// the kubelet's part is played by `pass`, which drops a leaving pod once it was looked at).
    pub fn delete(&mut self, name: &str) {
        let mut pod = self.pod(name).expect("a pod to delete");
        pod.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now()));
        self.api.put_pod(pod);
    }

    /// The pod's containers ended well: its phase is `Succeeded`, as its kubelet says.
    pub fn succeed(&mut self, name: &str) {
        let mut pod = self.pod(name).expect("a pod that ran");
        pod.status.get_or_insert_with(Default::default).phase = Some("Succeeded".into());
        self.api.put_pod(pod);
    }

    pub fn pod(&self, name: &str) -> Option<Pod> {
        self.api.pod(NAMESPACE, name)
    }

    /// The Node the pod is bound to.
    pub fn node_of(&self, name: &str) -> Option<String> {
        self.pod(name)?.spec?.node_name
    }

    /// The pod's `PodScheduled` condition: its status and reason, e.g. `("False", "Unschedulable")`.
    pub fn scheduled(&self, name: &str) -> Option<(String, String)> {
        let conditions = self.pod(name)?.status?.conditions?;
        let condition = conditions.into_iter().find(|c| c.type_ == "PodScheduled")?;
        Some((condition.status, condition.reason.unwrap_or_default()))
    }

    /// The live Slurm job linked to the pod, if there is one.
    pub fn job_of(&self, name: &str) -> Option<Job> {
        let uid = format!("uid-{name}");
        self.slurm.live_jobs().into_iter().find(|job| job.admin_comment.contains(&uid))
    }

    /// The host passes over pods as its controller would, until a round changes nothing in Slurm or
    /// in the API server. Returns the writes made to the API server meanwhile.
    pub async fn settle(&mut self) -> Vec<String> {
        let before = self.api.writes().len();
        // Events repeat on every pass that waits (as a series): they are not a change of state.
        let changes = |world: &Self| {
            let writes = world.api.writes().iter().filter(|write| !write.starts_with("event ")).count();
            (writes, world.slurm.requests().len())
        };
        for _ in 0..MOST_ROUNDS {
            let changed_before = changes(self);
            let asked_again = self.round().await;
            if changes(self) == changed_before && !asked_again {
                return self.api.writes().split_off(before);
            }
        }
        panic!("the world did not settle in {MOST_ROUNDS} rounds: {:?}", self.api.writes());
    }

    /// One round of the controller's triggers, time compressed: a pod is passed over when its object
    /// changed (the watch), when the job cache saw its job change (the poll), when another pass asked
    /// for it (a group's other members), or when its last pass asked to look again soon. A pass that
    /// asked to be rechecked in a minute ([`RECHECK`]) is not passed again by time alone, so a test
    /// shows what a user sees within that minute. Returns whether a pass asked for another pod.
    async fn round(&mut self) -> bool {
        let mut due = std::mem::take(&mut self.due_soon);
        // The poll: Slurm's nodes, and the pods whose jobs changed.
        let _ = self.ctx.placement.slurm_nodes.poll_once(self.slurm.as_ref()).await;
        // Nodes, slurmd pods or Slurm's nodes changed: every pod is passed over again.
        if self.ctx.placement.publish() {
            due.extend(self.pod_names());
        }
        if let Ok(changed) = self.ctx.jobs.refresh(self.slurm.as_ref()).await {
            due.extend(changed.into_iter().map(|key| key.name));
        }
        // The watch: every pod whose object differs from when it was last passed over.
        for pod in self.api.pods() {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let now = serde_json::to_string(&pod).expect("JSON");
            if self.last_passed.get(&name) != Some(&now) {
                due.insert(name);
            }
            // What the watch keeps of it, read from its JSON as the watch reads it.
            self.pods.apply_watcher_event(&watcher::Event::Apply(WatchedPod::from(&pod)));
        }
        while let Ok(asked) = self.decide_again.try_recv() {
            due.insert(asked.name);
        }
        for name in due {
            let Some(pod) = self.pod(&name) else { continue };
            self.last_passed.insert(name.clone(), serde_json::to_string(&pod).expect("JSON"));
            let leaving = pod.metadata.deletion_timestamp.is_some();
            let pod = WatchedPod::from(&pod);
            match reconcile::reconcile(Arc::new(pod.clone()), self.ctx.clone()).await {
                Ok(action) if action == Action::await_change() || action == Action::requeue(RECHECK) => {}
                Ok(_soon) => _ = self.due_soon.insert(name.clone()),
                // The controller retries an error soon (`error_policy`).
                Err(error) => {
                    eprintln!("pass over {name}: {error}");
                    self.due_soon.insert(name.clone());
                }
            }
            if leaving {
                // The kubelet is done with it: gone from the API server.
                self.api.remove_pod(NAMESPACE, &name);
                self.pods.apply_watcher_event(&watcher::Event::Delete(pod));
            }
        }
        let mut asked_again = false;
        while let Ok(asked) = self.decide_again.try_recv() {
            self.due_soon.insert(asked.name);
            asked_again = true;
        }
        asked_again
    }
}
