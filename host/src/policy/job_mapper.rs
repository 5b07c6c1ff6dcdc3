//! The `job-mapper` decision point: a loaded job-mapper module and how to run it.

use std::sync::Arc;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use wasmtime::component::Component;

use super::engine::{Limits, Runtime};
use super::error::PolicyError;
use super::host::HostState;
use super::{bundled, imports};

pub(crate) mod bindings {
    wasmtime::component::bindgen!({
        world: "job-mapper",
        path: "../wit",
        additional_derives: [PartialEq, Eq],
    });
}

pub use bindings::sunk::policy::job_types::{
    Cluster, Exclusive, JobRequest, KeyValue, Mapping, NodeSelectorRequirement, Pod, Rejection, SelectorOperator,
    Toleration,
};

/// The decision point's name, as in the WIT export; tags log lines.
const DECISION: &str = "map-pod";

/// A loaded job-mapper module: turns a pod into the Slurm job that holds its place, or a rejection.
///
/// Cheap to clone and shareable across threads; every [`JobMapper::map_pod`] runs in a fresh sandbox.
#[derive(Clone)]
pub struct JobMapper {
    module: Arc<Module>,
    limits: Limits,
}

impl std::fmt::Debug for JobMapper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobMapper")
            .field("digest", &self.digest())
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

struct Module {
    /// Keeps the engine (and its epoch ticker) alive while the module is.
    runtime: Arc<Runtime>,
    pre: bindings::JobMapperPre<super::engine::StoreState>,
    digest: Arc<str>,
    config: Option<Arc<str>>,
}

impl JobMapper {
    /// The job-mapper compiled into this binary (the SUNK annotation table), without configuration.
    pub fn bundled() -> Result<JobMapper> {
        JobMapper::load(bundled::JOB_MAPPER, None).context("loading the bundled job-mapper")
    }

    /// Compiles a job-mapper component (the bytes of a `.wasm` component, not a core module) and
    /// checks that it imports nothing but `sunk:policy/host` and exports the `job-mapper` world.
    /// `config` is what the module's `config()` import returns.
    pub fn load(bytes: &[u8], config: Option<String>) -> Result<JobMapper> {
        let runtime = Runtime::shared()?;
        let component = Component::new(&runtime.engine, bytes).map_err(|e| wasm_error(e, "compiling"))?;
        imports::check(&component, &runtime.engine)?;
        let instance_pre = runtime.linker.instantiate_pre(&component).map_err(|e| wasm_error(e, "linking"))?;
        let pre = bindings::JobMapperPre::new(instance_pre)
            .map_err(|e| wasm_error(e, "finding the job-mapper exports of"))?;
        let module = Module { digest: sha256_hex(bytes).into(), config: config.map(Arc::from), runtime, pre };
        Ok(JobMapper { module: Arc::new(module), limits: Limits::default() })
    }

    /// The same module, run with other limits.
    pub fn with_limits(mut self, limits: Limits) -> JobMapper {
        self.limits = limits;
        self
    }

    /// The limits each decision runs with.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// sha256 of the component's bytes, 64 lowercase hex digits.
    pub fn digest(&self) -> &str {
        &self.module.digest
    }

    /// Runs the module's `map-pod` in a fresh store.
    pub fn map_pod(&self, pod: &Pod, cluster: &Cluster) -> Result<Mapping, PolicyError> {
        let module = &self.module;
        let host = HostState::new(module.digest.clone(), DECISION, module.config.clone());
        let mut store = module.runtime.store(host, self.limits);
        let result =
            module.pre.instantiate(&mut store).and_then(|instance| instance.call_map_pod(&mut store, pod, cluster));
        let mapping = result.map_err(|error| PolicyError::from_wasmtime(&error, store.data().host.last_error_log()))?;
        check_mapping(&mapping)?;
        Ok(mapping)
    }
}

/// What the WIT types cannot say: a job needs some CPU and memory, a rejection needs words.
fn check_mapping(mapping: &Mapping) -> Result<(), PolicyError> {
    let problem = match mapping {
        Mapping::Job(job) if job.cpus == 0 => "a job request with 0 cpus",
        Mapping::Job(job) if job.memory_mib == 0 => "a job request with 0 memory-mib",
        Mapping::Reject(r) if r.message.trim().is_empty() => "a rejection without a message",
        _ => return Ok(()),
    };
    Err(PolicyError::Invalid(format!("map-pod returned {problem}")))
}

/// A wasmtime error as an `anyhow` one, saying what was being done to the component.
fn wasm_error(error: wasmtime::Error, doing: &str) -> anyhow::Error {
    anyhow::Error::from(error).context(format!("{doing} the policy component"))
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    fn pod() -> Pod {
        Pod {
            namespace: "ml".into(),
            name: "train-0".into(),
            uid: "0b5e".into(),
            labels: vec![],
            annotations: vec![],
            cpu_request_millis: 2500,
            memory_request_bytes: 3 << 30,
            cpu_limit_millis: 0,
            memory_limit_bytes: 0,
            gpus: 2,
            node_selector: vec![],
            required_node_affinity: vec![],
            tolerations: vec![],
            priority: None,
            termination_grace_seconds: 30,
        }
    }

    fn cluster() -> Cluster {
        Cluster {
            partitions: vec!["batch".into(), "gpu".into()],
            default_partition: Some("batch".into()),
            default_account: Some("root".into()),
            kill_wait_seconds: 60,
        }
    }

    fn annotation(key: &str, value: &str) -> KeyValue {
        KeyValue { key: key.into(), value: value.into() }
    }

    #[test]
    fn bundled_maps_a_typical_pod() {
        let mapper = JobMapper::bundled().unwrap();
        let pod = Pod {
            annotations: vec![
                annotation("sunk.dev/partition", "gpu"),
                annotation("sunk.coreweave.com/qos", "high"),
                annotation("sunk.dev/exclusive", "user"),
                annotation("sunk.dev/excluded-nodes", "gpu[1-3,7],cpu1"),
                annotation("sunk.dev/user-id", "1000"),
                annotation("sunk.dev/timeout", "90"),
                annotation("sunk.dev/constraints", "ib"),
            ],
            required_node_affinity: vec![vec![NodeSelectorRequirement {
                key: "nvidia.com/gpu.product".into(),
                operator: SelectorOperator::In,
                values: vec!["H100".into(), "A100".into()],
            }]],
            ..pod()
        };
        let want = JobRequest {
            partition: Some("gpu".into()),
            account: Some("root".into()),
            qos: Some("high".into()),
            reservation: None,
            comment: None,
            constraints: Some("ib&(H100|A100)".into()),
            prefer: None,
            exclusive: Some(Exclusive::User),
            excluded_nodes: vec!["gpu[1-3,7]".into(), "cpu1".into()],
            required_nodes: vec![],
            priority: None,
            user_id: Some(1000),
            group_id: Some(1000),
            current_working_directory: None,
            time_limit_minutes: Some(90),
            cpus: 3,
            memory_mib: 3072,
            tres_per_node: Some("gres/gpu:2".into()),
        };
        assert_eq!(mapper.map_pod(&pod, &cluster()), Ok(Mapping::Job(want)));
    }

    #[test]
    fn bundled_rejects_a_pod_without_requests() {
        let mapper = JobMapper::bundled().unwrap();
        let pod = Pod { cpu_request_millis: 0, memory_request_bytes: 0, ..pod() };
        let Mapping::Reject(rejection) = mapper.map_pod(&pod, &cluster()).unwrap() else {
            panic!("the pod was mapped");
        };
        assert_eq!(rejection.field, "spec.containers[*].resources.requests.cpu");
        let pod = Pod { memory_request_bytes: 0, ..self::pod() };
        let Mapping::Reject(rejection) = mapper.map_pod(&pod, &cluster()).unwrap() else {
            panic!("the pod was mapped");
        };
        assert_eq!(rejection.field, "spec.containers[*].resources.requests.memory");
    }

    #[test]
    fn bundled_rejects_a_bad_annotation() {
        let mapper = JobMapper::bundled().unwrap();
        let pod = Pod { annotations: vec![annotation("sunk.dev/priority", "-1")], ..pod() };
        let Mapping::Reject(rejection) = mapper.map_pod(&pod, &cluster()).unwrap() else {
            panic!("the pod was mapped");
        };
        assert_eq!(rejection.field, "sunk.dev/priority");
        assert!(rejection.message.contains("\"-1\""), "{}", rejection.message);
    }

    #[test]
    fn digest_is_sha256_hex() {
        let mapper = JobMapper::bundled().unwrap();
        let digest = mapper.digest();
        assert_eq!(digest.len(), 64);
        assert!(digest.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')));
        assert_eq!(digest, sha256_hex(bundled::JOB_MAPPER));
        assert_eq!(sha256_hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }

    #[test]
    fn clones_share_the_module_across_threads() {
        let mapper = JobMapper::bundled().unwrap();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let mapper = mapper.clone();
                std::thread::spawn(move || mapper.map_pod(&pod(), &cluster()).unwrap())
            })
            .collect();
        for thread in threads {
            assert!(matches!(thread.join().unwrap(), Mapping::Job(_)));
        }
    }

    #[test]
    fn refuses_a_core_module_and_garbage() {
        assert!(JobMapper::load(b"not wasm", None).is_err());
        // The smallest core module: a component is required.
        assert!(JobMapper::load(b"\0asm\x01\0\0\0", None).is_err());
    }

    /// Prints per-decision latency (run with `--nocapture`); asserts nothing about speed.
    #[test]
    fn decision_latency() {
        let mapper = JobMapper::bundled().unwrap();
        let (pod, cluster) = (pod(), cluster());
        let mut samples: Vec<_> = (0..500)
            .map(|_| {
                let start = Instant::now();
                mapper.map_pod(&pod, &cluster).unwrap();
                start.elapsed()
            })
            .collect();
        samples.sort();
        println!(
            "job-mapper: component {} bytes, per decision p50 {:?} p99 {:?}",
            bundled::JOB_MAPPER.len(),
            samples[samples.len() / 2],
            samples[samples.len() * 99 / 100]
        );
    }
}
