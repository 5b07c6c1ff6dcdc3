//! Harness for sunk's end-to-end tests: the real kube-apiserver and Slurm of `tests/cluster/up.sh`,
//! and a real `sunk host` process per test.
//!
//! Tests must run one at a time (`--test-threads=1`): they share the cluster's two Slurm nodes.

use std::future::Future;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use sunk::scheduler::linked_pods;
use sunk::slurm::{Job, JobState, JobsPage, SlurmClient, TokenSigner};

mod components;
pub mod figures;
mod host_chart;
mod hostile;
mod nodes;
mod priority;
pub mod process;
mod restarts;
mod slurm;
pub use components::{Frozen, pid_of as component_pid, restart_component};
pub use host_chart::{BACKUP_SLURMCTLD, CHART};
pub use hostile::{Answer, HostileProxy};
pub use nodes::{NodeGuard, create_nodeset, set_unschedulable, slurmd_image};
pub use priority::Priority;
pub use restarts::{BOUND_AFTER_RESTART, ride_out_restarts};
pub use slurm::{
    SlurmJob, in_slurm_root, jobs_not_ended, slurm_node, slurm_root, slurm_version, slurmrestd_frozen, wait_launched,
    wait_no_node_completing,
};

pub const SCHEDULER: &str = "sunk";
/// The host image the local cluster builds from images/sunk (tests/cluster/env.sh).
pub const SUNK_IMAGE_REPOSITORY: &str = "localhost/sunk/sunk";
pub const SUNK_IMAGE_TAG: &str = "dev";

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs the helm binary the local cluster's parts include (tests/cluster/build-kube.sh) from the
/// repository's root; returns its standard output, or an error carrying its standard error. Without
/// a cluster for `helm template` (the chart's `lookup`s then find nothing).
pub fn run_helm(args: &[&str]) -> anyhow::Result<String> {
    let helm = repo_root().join(".cache/bin/helm");
    let output = Command::new(&helm)
        .args(args)
        .current_dir(repo_root())
        .output()
        .with_context(|| format!("running {}", helm.display()))?;
    anyhow::ensure!(output.status.success(), "helm {args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Where the local cluster keeps its state, as in tests/cluster/env.sh.
pub(crate) fn state_dir() -> PathBuf {
    std::env::var_os("SUNK_STATE").map(PathBuf::from).unwrap_or_else(|| repo_root().join(".cluster"))
}

/// Notes which test made `namespace` (libtest names each test's thread after it), so that a failed
/// run's account (tests/cluster/diagnose.sh) can show the logs of the hosts the failing tests started.
fn record_test_namespace(namespace: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let test = std::thread::current().name().unwrap_or("unnamed").to_string();
    let mut record = std::fs::OpenOptions::new().create(true).append(true).open(state_dir().join("logs/tests.tsv"))?;
    writeln!(record, "{test}\t{namespace}")
}

fn sunk_binary() -> PathBuf {
    std::env::var_os("SUNK_BINARY").map(PathBuf::from).unwrap_or_else(|| repo_root().join("target/debug/sunk"))
}

/// A component built from `examples/policies/<name>` by `scripts/policy-examples.sh`.
pub fn example_policy(name: &str) -> anyhow::Result<PathBuf> {
    let path = repo_root().join("target/examples").join(format!("{name}.wasm"));
    anyhow::ensure!(path.exists(), "{} is missing: run scripts/policy-examples.sh first", path.display());
    Ok(path)
}

/// Installs the CustomResourceDefinitions this build of sunk serves (what the chart's `crds/` holds),
/// as the chart's upgrade hook does, and waits until the API server serves them.
async fn ensure_crds(kube: &Client) -> anyhow::Result<()> {
    sunk::cli::apply_crds(kube, Duration::from_secs(20)).await?;
    Ok(())
}

fn slurm_url() -> String {
    format!("http://{}", slurmrestd_address())
}

/// Where the local cluster's slurmrestd listens (`127.0.0.1:<port>`).
pub fn slurmrestd_address() -> String {
    let port = std::env::var("SLURMRESTD_PORT").unwrap_or_else(|_| "16820".into());
    format!("127.0.0.1:{port}")
}

/// The local cluster, as the tests see it.
pub struct Cluster {
    pub kube: Client,
    pub slurm: SlurmClient,
    pub namespace: String,
    hosts: Vec<Child>,
    /// Where each host serves /metrics, by host index.
    http_ports: Vec<u16>,
}

impl Cluster {
    /// Connects to the running local cluster and makes a fresh namespace for one test.
    pub async fn connect(test: &str) -> anyhow::Result<Self> {
        sunk::tls::install_crypto_provider();
        let state = state_dir();
        let kubeconfig = state.join("kubeconfig");
        anyhow::ensure!(kubeconfig.exists(), "no local cluster at {}: run tests/cluster/up.sh first", state.display());
        let kube = sunk::kube::connect(Some(&kubeconfig)).await?;
        let key = std::fs::read(state.join("slurm-etc/jwt.key")).context("reading the Slurm JWT key")?;
        let slurm = SlurmClient::new(&slurm_url(), TokenSigner::new(&key, "root", Duration::from_secs(600)))?;
        let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis() % 0xffffff;
        let namespace = format!("{test}-{stamp:x}");
        let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": namespace}}))?;
        Api::<Namespace>::all(kube.clone()).create(&PostParams::default(), &ns).await?;
        record_test_namespace(&namespace)?;
        ensure_crds(&kube).await?;
        Ok(Self { kube, slurm, namespace, hosts: Vec::new(), http_ports: Vec::new() })
    }

    /// A client for the local cluster as its admin, for work outside any test's namespace.
    pub async fn client() -> anyhow::Result<Client> {
        sunk::tls::install_crypto_provider();
        sunk::kube::connect(Some(&state_dir().join("kubeconfig"))).await
    }

    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.kube.clone(), &self.namespace)
    }

    /// Starts `sunk host` as the cluster admin, with extra environment (e.g. failpoints). Its
    /// NodeSet controller, Syncer and pool audit are off unless `env` turns them on
    /// (`SUNK_NODESET_CONTROLLER=true`, `SUNK_SYNCER=true`, `SUNK_POOL_AUDIT=true`): the local cluster's
    /// own NodeSet is kept by the cluster's host, and two Syncers would argue over the same Nodes.
    pub fn start_host(&mut self, env: &[(&str, &str)]) -> anyhow::Result<usize> {
        self.start_host_via(&slurm_url(), env)
    }

    /// The same, talking to Slurm through `slurm_url` (a [`HostileProxy`], say).
    pub fn start_host_via(&mut self, slurm_url: &str, env: &[(&str, &str)]) -> anyhow::Result<usize> {
        let state = state_dir();
        let binary = sunk_binary();
        anyhow::ensure!(binary.exists(), "{} is missing: run `cargo build -p sunk` first", binary.display());
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.host_log())?;
        let http_port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = Command::new(binary)
            .arg("host")
            .arg("--kubeconfig")
            .arg(state.join("kubeconfig"))
            .arg("--slurm-url")
            .arg(slurm_url)
            .arg("--slurm-jwt-key")
            .arg(state.join("slurm-etc/jwt.key"))
            .arg("--poll-interval-ms")
            .arg("200")
            .arg("--policy-namespace")
            .arg(&self.namespace)
            .arg("--http-addr")
            .arg(format!("127.0.0.1:{http_port}"))
            .env("SUNK_SCHEDULER_NAME", SCHEDULER)
            .env("SUNK_NODESET_CONTROLLER", "false")
            .env("SUNK_SYNCER", "false")
            .env("SUNK_POOL_AUDIT", "false")
            .env("SUNK_TAINT_SLURM_NODES", "false")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        self.hosts.push(child);
        self.http_ports.push(http_port);
        Ok(self.hosts.len() - 1)
    }

    /// Where the hosts this test started log (all of them, to one file).
    pub fn host_log(&self) -> PathBuf {
        state_dir().join(format!("logs/host-{}.log", self.namespace))
    }

    /// A tenancy document granting this test's namespace `grant` (the fields of one grant, e.g.
    /// `{"requiredNodes": true}`), written for a host to read: pass `("SUNK_TENANCY", &path)`.
    pub fn grant(&self, grant: serde_json::Value) -> anyhow::Result<String> {
        let mut entry = grant;
        entry["namespaces"] = serde_json::json!([self.namespace]);
        self.tenancy(serde_json::json!({"grants": [entry]}))
    }

    /// The tenancy document `document`, written for a host to read: pass `("SUNK_TENANCY", &path)`.
    pub fn tenancy(&self, document: serde_json::Value) -> anyhow::Result<String> {
        let path = state_dir().join(format!("logs/tenancy-{}.json", self.namespace));
        std::fs::write(&path, document.to_string())?;
        Ok(path.display().to_string())
    }

    /// Starts a host that runs only the NodeSet controller, for this test's namespace.
    pub fn start_nodeset_host(&mut self) -> anyhow::Result<usize> {
        let namespace = self.namespace.clone();
        self.start_host(&[
            ("SUNK_NODESET_CONTROLLER", "true"),
            ("SUNK_SCHEDULER", "false"),
            ("SUNK_NODESET_NAMESPACE", &namespace),
            ("SUNK_SLURMCTLD_ADDRESS", "slurmctld.slurm.svc.cluster.local:6817"),
        ])
    }

    /// The text of a host's /metrics (waits for the endpoint to come up).
    pub async fn metrics(&self, host: usize) -> anyhow::Result<String> {
        let url = format!("http://127.0.0.1:{}/metrics", self.http_ports[host]);
        wait_for("the host's /metrics", Duration::from_secs(20), || {
            let url = url.clone();
            async move { reqwest::get(&url).await.ok()?.error_for_status().ok()?.text().await.ok() }
        })
        .await
    }

    /// The `sunk` binary with `args`, acting as the cluster admin, run from the repository root.
    pub fn sunk_command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(sunk_binary());
        command.args(args).env("SUNK_KUBECONFIG", state_dir().join("kubeconfig")).current_dir(repo_root());
        command
    }

    /// Runs the `sunk` binary with `args` as the cluster admin; returns its output.
    pub fn sunk_cli(&self, args: &[&str]) -> anyhow::Result<std::process::Output> {
        Ok(self.sunk_command(args).output()?)
    }

    /// `sunk policy push`es the example policy `name` (built by scripts/policy-examples.sh) into this
    /// test's namespace with its `config.example`, and waits until it is live.
    pub fn push_example_policy(&self, name: &str) -> anyhow::Result<()> {
        let module = example_policy(name)?;
        let config = repo_root().join(format!("examples/policies/{name}/config.example"));
        let (module, config) = (module.to_string_lossy(), config.to_string_lossy());
        let args = ["policy", "push", &module, "--name", name, "-n", &self.namespace, "--config-file", &config];
        let output = self.sunk_cli(&args)?;
        anyhow::ensure!(output.status.success(), "push {name}: {}", String::from_utf8_lossy(&output.stderr));
        Ok(())
    }

    /// The process id of a host started earlier.
    pub fn host_pid(&self, host: usize) -> u32 {
        self.hosts[host].id()
    }

    /// Kills a host started earlier (SIGKILL), as a crash would.
    pub fn kill_host(&mut self, host: usize) -> anyhow::Result<()> {
        self.hosts[host].kill()?;
        self.hosts[host].wait()?;
        Ok(())
    }

    /// Asks a host started earlier to stop (SIGTERM), as Kubernetes does, and waits for it to exit;
    /// returns its exit status.
    pub async fn terminate_host(&mut self, host: usize, timeout: Duration) -> anyhow::Result<ExitStatus> {
        let pid = self.hosts[host].id();
        signal(pid, "TERM")?;
        self.wait_host_exit(host, timeout).await
    }

    /// A host's `/readyz`: its status code and body.
    pub async fn readyz(&self, host: usize) -> anyhow::Result<(u16, String)> {
        let response = reqwest::get(format!("http://127.0.0.1:{}/readyz", self.http_ports[host])).await?;
        Ok((response.status().as_u16(), response.text().await?))
    }

    /// Every placeholder job (any state) of this test's pods, from one job listing (a gang's job once
    /// per member, an array's pending tasks each as its own), immediate allocations that came to nothing left out.
    pub async fn jobs_in_namespace(&self) -> anyhow::Result<Vec<(sunk::scheduler::PodKey, Job)>> {
        let JobsPage::All { jobs, .. } = self.slurm.jobs(None).await? else {
            bail!("a full job listing came back empty")
        };
        Ok(jobs
            .into_iter()
            .flat_map(|job| sunk::scheduler::linked(&job))
            .filter(|(pod, job)| pod.namespace == self.namespace && !sunk::scheduler::is_failed_attempt(job))
            .collect())
    }

    /// Whether a host started earlier is still running (its exit status, if it exited).
    pub fn host_exited(&mut self, host: usize) -> Option<ExitStatus> {
        self.hosts[host].try_wait().ok().flatten()
    }

    /// Waits for a host started earlier to exit on its own (e.g. at a failpoint); its exit status.
    pub async fn wait_host_exit(&mut self, host: usize, timeout: Duration) -> anyhow::Result<ExitStatus> {
        let child = &mut self.hosts[host];
        wait_for("the host to exit", timeout, || {
            let status = child.try_wait().ok().flatten();
            async move { status }
        })
        .await
    }

    /// Runs the real helm binary on this test's namespace (`helm install` the chart, ...); returns
    /// its standard output, or an error carrying its standard error.
    pub fn helm(&self, args: &[&str]) -> anyhow::Result<String> {
        let kubeconfig = state_dir().join("kubeconfig");
        let cluster = ["--namespace", &self.namespace, "--kubeconfig", kubeconfig.to_str().context("kubeconfig path")?];
        run_helm(&[args, &cluster].concat())
    }

    /// A Secret in this test's namespace holding the Slurm JWT key under `jwt.key`, as the chart
    /// expects it.
    pub async fn create_jwt_key_secret(&self, name: &str) -> anyhow::Result<()> {
        self.create_key_secret(name, "jwt.key").await
    }

    /// A Secret in this test's namespace holding the Slurm auth key under `slurm.key`, as slurmd
    /// pods of NodeSets mount it.
    pub async fn create_slurm_key_secret(&self, name: &str) -> anyhow::Result<()> {
        self.create_key_secret(name, "slurm.key").await
    }

    async fn create_key_secret(&self, name: &str, key_file: &str) -> anyhow::Result<()> {
        use k8s_openapi::ByteString;
        use k8s_openapi::api::core::v1::Secret;
        let key = std::fs::read(state_dir().join("slurm-etc").join(key_file))
            .with_context(|| format!("reading the Slurm key {key_file}"))?;
        let mut secret = Secret::default();
        secret.metadata.name = Some(name.to_string());
        secret.data = Some([(key_file.to_string(), ByteString(key))].into());
        Api::<Secret>::namespaced(self.kube.clone(), &self.namespace).create(&PostParams::default(), &secret).await?;
        Ok(())
    }

    /// Creates a pod from JSON (its namespace is filled in).
    pub async fn create_pod(&self, mut pod: serde_json::Value) -> anyhow::Result<Pod> {
        pod["metadata"]["namespace"] = self.namespace.clone().into();
        let pod: Pod = serde_json::from_value(pod)?;
        Ok(self.pods().create(&PostParams::default(), &pod).await?)
    }

    /// Every placeholder job (any state) of the pod with this UID (of an array, the pod's own task),
    /// but for immediate allocations Slurm refused: those never held a node, and the host does not
    /// count them as the pod's job either.
    pub async fn jobs_of(&self, uid: &str) -> anyhow::Result<Vec<Job>> {
        let jobs = self.every_job_of(uid).await?;
        Ok(jobs.into_iter().filter(|job| !sunk::scheduler::is_failed_attempt(job)).collect())
    }

    /// Every job linked to the pod, immediate allocations Slurm refused included.
    pub async fn every_job_of(&self, uid: &str) -> anyhow::Result<Vec<Job>> {
        let JobsPage::All { jobs, .. } = self.slurm.jobs(None).await? else {
            bail!("a full job listing came back empty")
        };
        Ok(jobs
            .iter()
            .flat_map(sunk::scheduler::linked)
            .filter(|(pod, _)| pod.uid == uid)
            .map(|(_, job)| job)
            .collect())
    }

    /// The pod, once `check` accepts it.
    pub async fn wait_pod(
        &self,
        name: &str,
        what: &str,
        timeout: Duration,
        check: impl Fn(&Pod) -> bool,
    ) -> anyhow::Result<Pod> {
        let pods = self.pods();
        let last_seen = std::sync::Mutex::new(None::<Pod>);
        let waited = wait_for(what, timeout, || {
            let (pods, check, last_seen) = (pods.clone(), &check, &last_seen);
            async move {
                let pod = pods.get_opt(name).await.ok().flatten()?;
                *last_seen.lock().unwrap() = Some(pod.clone());
                check(&pod).then_some(pod)
            }
        })
        .await;
        // A timeout says what the pod looked like last, so that a failure can be read from the output.
        waited.map_err(|error| {
            let seen = last_seen.lock().unwrap().take();
            let seen = seen.map_or("never seen".to_string(), |pod| {
                format!("last seen on {:?} with PodScheduled {:?}", node_name(&pod), scheduled_condition(&pod))
            });
            anyhow::anyhow!("{error}: pod {name} {seen}")
        })
    }

    /// The Kubernetes Node whose slurmd pod runs this Slurm node.
    pub async fn kube_node_of(&self, slurm_node: &str) -> anyhow::Result<Option<String>> {
        let pods = Api::<Pod>::all(self.kube.clone())
            .list(&ListParams::default().labels(&format!("{}={slurm_node}", sunk::scheduler::SLURM_NODE_LABEL)))
            .await?;
        Ok(pods.items.first().and_then(|pod| pod.spec.as_ref()?.node_name.clone()))
    }

    /// The Slurm node whose slurmd pod runs on this Kubernetes Node.
    pub async fn slurm_node_on(&self, node: &str) -> anyhow::Result<Option<String>> {
        let label = sunk::scheduler::SLURM_NODE_LABEL;
        let pods = Api::<Pod>::all(self.kube.clone()).list(&ListParams::default().labels(label)).await?;
        Ok(pods.items.iter().find(|pod| node_name(pod) == Some(node)).and_then(|pod| pod.labels().get(label).cloned()))
    }

    /// Events recorded about one object in this namespace, as (reason, note).
    pub async fn events_of(&self, name: &str) -> anyhow::Result<Vec<(String, String)>> {
        self.events_in(&self.namespace, name).await
    }

    /// Which of the pods `names` first has an Event that `matches(reason, note)`, within `timeout`.
    pub async fn pod_with_event<'n>(
        &self,
        names: &[&'n str],
        timeout: Duration,
        matches: impl Fn(&str, &str) -> bool,
    ) -> anyhow::Result<&'n str> {
        wait_for(&format!("an Event on one of {names:?}"), timeout, || async {
            for &name in names {
                let events = self.events_of(name).await.ok()?;
                if events.iter().any(|(reason, note)| matches(reason, note)) {
                    return Some(name);
                }
            }
            None
        })
        .await
    }

    /// Events recorded in `namespace` about the object `name` (`default` for cluster-scoped ones,
    /// such as Nodes), as (reason, note).
    pub async fn events_in(&self, namespace: &str, name: &str) -> anyhow::Result<Vec<(String, String)>> {
        let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(self.kube.clone(), namespace);
        Ok(events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|event| event.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .map(|event| (event.reason.unwrap_or_default(), event.note.unwrap_or_default()))
            .collect())
    }

    /// Waits for an Event about `name` that `matches(reason, note)` accepts. Events are written
    /// after the change they report, so a test that saw the change must still wait for its Event.
    pub async fn wait_event(&self, name: &str, what: &str, matches: impl Fn(&str, &str) -> bool) -> anyhow::Result<()> {
        let found = wait_for(what, Duration::from_secs(20), || async {
            let events = self.events_of(name).await.ok()?;
            events.iter().any(|(reason, note)| matches(reason, note)).then_some(())
        })
        .await;
        if found.is_err() {
            bail!("no Event: {what}; the Events about {name}: {:?}", self.events_of(name).await?);
        }
        Ok(())
    }

    /// Deletes a pod with its grace period (the kubelet completes deletion of bound pods).
    pub async fn delete_pod(&self, name: &str) -> anyhow::Result<()> {
        self.pods().delete(name, &DeleteParams::default()).await?;
        Ok(())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for host in &mut self.hosts {
            let _ = host.kill();
            let _ = host.wait();
        }
        // Remove what the test left so the next test finds both Slurm nodes free. The test's own
        // runtime is blocked here, and its clients' connections live on it, so the cleanup runs
        // on a runtime of its own with fresh clients.
        let namespace = self.namespace.clone();
        let cleanup = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            if let Err(error) = runtime.block_on(cleanup(&namespace)) {
                eprintln!("cleaning up namespace {namespace} failed: {error:#}");
            }
        });
        let _ = cleanup.join();
    }
}

/// Deletes a test namespace's pods at once, cancels their placeholders, and deletes the namespace
/// (the controller-manager finishes that in the background).
/// A request's outcome, with "not found" (what it was to remove is gone already) as success.
fn already_gone<T>(result: kube::Result<T>) -> kube::Result<()> {
    match result {
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        other => other.map(drop),
    }
}

async fn cleanup(namespace: &str) -> anyhow::Result<()> {
    let state = state_dir();
    let kube = sunk::kube::connect(Some(&state.join("kubeconfig"))).await?;
    let key = std::fs::read(state.join("slurm-etc/jwt.key"))?;
    let slurm = SlurmClient::new(&slurm_url(), TokenSigner::new(&key, "root", Duration::from_secs(600)))?;
    // A NodeSet's finalizer waits for its host, which is gone by now: release it, and delete the
    // Slurm nodes its slurmd pods registered, so the next test finds the Nodes free.
    let nodesets: Api<sunk::nodeset::NodeSet> = Api::namespaced(kube.clone(), namespace);
    for nodeset in nodesets.list(&ListParams::default()).await?.items {
        let release = serde_json::json!({"metadata": {"finalizers": null}});
        // Either may find it gone already (its host, or a chart's uninstall hook, was quicker).
        already_gone(nodesets.patch(&nodeset.name_any(), &PatchParams::default(), &Patch::Merge(&release)).await)?;
        already_gone(nodesets.delete(&nodeset.name_any(), &DeleteParams::default()).await)?;
    }
    let pods: Api<Pod> = Api::namespaced(kube.clone(), namespace);
    for pod in pods.list(&ListParams::default()).await?.items {
        let now = DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
        already_gone(pods.delete(&pod.name_any(), &now).await)?;
    }
    if let JobsPage::All { jobs, .. } = slurm.jobs(None).await? {
        for job in jobs {
            // A hold job (a test's pool host's) holds for pods this cleanup just deleted.
            let hold = sunk::scheduler::held_node(&job.admin_comment).is_some() && job.state() != JobState::Ended;
            if hold || linked_pods(&job).iter().any(|pod| pod.namespace == namespace) {
                slurm.cancel(job.job_id).await?;
            }
        }
    }
    if let sunk::slurm::NodesPage::All { nodes, .. } = slurm.nodes(None).await? {
        let owner = format!("\"namespace\":\"{namespace}\"");
        // Jobs a test started on them by hand go first (a node holding a job cannot be deleted);
        // one failure must not leave the rest for the next test to trip over.
        let theirs: Vec<&str> =
            nodes.iter().filter(|node| node.comment.contains(&owner)).map(|node| node.name.as_str()).collect();
        // A job whose slurmd is already gone stays COMPLETING until the node is marked DOWN.
        if !theirs.is_empty() {
            let list = theirs.join(",");
            let _ = in_slurm_root(&["scancel", "-w", &list]);
            let _ =
                in_slurm_root(&["scontrol", "update", &format!("nodename={list}"), "state=down", "reason=e2e cleanup"]);
        }
        for node in theirs {
            if let Err(error) = slurm.delete_node(node).await {
                eprintln!("cleanup: deleting Slurm node {node}: {error}");
            }
        }
    }
    Api::<Namespace>::all(kube).delete(namespace, &DeleteParams::default()).await?;
    Ok(())
}

pub(crate) fn signal(pid: u32, signal: &str) -> anyhow::Result<()> {
    let status = Command::new("kill").arg(format!("-{signal}")).arg(pid.to_string()).status()?;
    anyhow::ensure!(status.success(), "kill -{signal} {pid} failed");
    Ok(())
}

/// The cluster's own `kubectl`, as the cluster admin.
pub fn kubectl(args: &[&str]) -> Command {
    let mut command = Command::new(repo_root().join(".cache/bin/kubectl"));
    command.args(args).env("KUBECONFIG", state_dir().join("kubeconfig"));
    command
}

/// Polls `probe` every 200 ms until it yields a value or `timeout` passes.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await {
            return Ok(value);
        }
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The tiny image of the local cluster (images/busybox), present on every Node.
pub const BUSYBOX: &str = "localhost/sunk/busybox:1.37";

/// A pod for sunk's scheduler requesting `cpu` and `memory`. Its container says hello and then
/// waits, leaving at once on SIGTERM (as PID 1 it would otherwise ignore it for the grace period).
pub fn pod(name: &str, cpu: &str, memory: &str) -> serde_json::Value {
    serde_json::json!({
        "metadata": {"name": name},
        "spec": {
            "schedulerName": SCHEDULER,
            "terminationGracePeriodSeconds": 5,
            "containers": [{
                "name": "main",
                "image": BUSYBOX,
                "command": ["sh", "-c", "trap 'exit 0' TERM; echo \"hello from $HOSTNAME\"; while true; do sleep 1; done"],
                "resources": {"requests": {"cpu": cpu, "memory": memory}}
            }]
        }
    })
}

/// Whether the kubelet runs the pod: it admitted it and started its containers.
pub fn is_running(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|status| status.phase.as_deref()) == Some("Running")
}

pub fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref()
}

/// The PodScheduled condition as (status, reason, message).
pub fn scheduled_condition(pod: &Pod) -> Option<(String, String, String)> {
    let condition = pod.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "PodScheduled")?;
    Some((
        condition.status.clone(),
        condition.reason.clone().unwrap_or_default(),
        condition.message.clone().unwrap_or_default(),
    ))
}

/// The value of an unlabelled series (a gauge, or a counter by its `_total` name) in a /metrics text.
pub fn metric_value(metrics: &str, name: &str) -> Option<u64> {
    let value = metrics.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))?;
    value.trim().parse().ok()
}
