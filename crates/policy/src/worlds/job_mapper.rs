//! `job-mapper`: a pod (and what the host knows of the cluster) -> the Slurm job that holds its place.

use serde::{Deserialize, Serialize};
use wasmtime::Store;
use wasmtime::component::InstancePre;

use crate::bindings::job_mapper::JobMapperPre;
use crate::bindings::job_types::{Cluster, JobRequest, KeyValue, Mapping, Pod};
use crate::engine::StoreState;
use crate::module::Module;
use crate::world::{World, check_text_size};
use crate::{bundled, error::PolicyError};

/// The `job-mapper` world.
pub enum JobMapperWorld {}

/// The arguments of `map-pod`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapPodInput {
    pub pod: Pod,
    pub cluster: Cluster,
}

impl World for JobMapperWorld {
    const NAME: &'static str = "job-mapper";
    const EXPORT: &'static str = "map-pod";
    type Input = MapPodInput;
    type Output = Mapping;
    type Pre = JobMapperPre<StoreState>;

    fn bundled() -> &'static [u8] {
        bundled::JOB_MAPPER
    }

    fn pre(instance: InstancePre<StoreState>) -> wasmtime::Result<Self::Pre> {
        JobMapperPre::new(instance)
    }

    fn call(pre: &Self::Pre, store: &mut Store<StoreState>, input: &MapPodInput) -> wasmtime::Result<Mapping> {
        pre.instantiate(&mut *store)?.call_map_pod(store, &input.pod, &input.cluster)
    }

    fn check(_input: &MapPodInput, output: &Mapping) -> Result<(), String> {
        match output {
            Mapping::Job(job) if job.cpus == 0 => Err("a job request with 0 cpus".into()),
            Mapping::Job(job) if job.memory_mib == 0 => Err("a job request with 0 memory-mib".into()),
            Mapping::Job(job) => check_text_size(job_texts(job)),
            Mapping::Reject(r) if r.message.trim().is_empty() => Err("a rejection without a message".into()),
            Mapping::Reject(r) => check_text_size([r.field.as_str(), r.message.as_str()]),
        }
    }

    fn is_rejection(output: &Mapping) -> bool {
        matches!(output, Mapping::Reject(_))
    }

    fn samples() -> Vec<MapPodInput> {
        let cluster = Cluster {
            partitions: vec!["batch".into(), "gpu".into()],
            default_partition: Some("batch".into()),
            default_account: None,
            kill_wait_seconds: 30,
        };
        let cpu_pod = Pod {
            namespace: "default".into(),
            name: "sample-cpu".into(),
            uid: "00000000-0000-0000-0000-000000000001".into(),
            labels: vec![KeyValue { key: "app".into(), value: "sample".into() }],
            annotations: vec![],
            cpu_request_millis: 500,
            memory_request_bytes: 256 << 20,
            cpu_limit_millis: 0,
            memory_limit_bytes: 0,
            gpus: 0,
            node_selector: vec![],
            required_node_affinity: vec![],
            tolerations: vec![],
            priority: None,
            termination_grace_seconds: 10,
        };
        let gpu_pod = Pod {
            name: "sample-gpu".into(),
            uid: "00000000-0000-0000-0000-000000000002".into(),
            annotations: vec![KeyValue { key: "sunk.dev/partition".into(), value: "gpu".into() }],
            cpu_request_millis: 8000,
            memory_request_bytes: 64 << 30,
            gpus: 4,
            priority: Some(1000),
            ..cpu_pod.clone()
        };
        let without_requests = Pod {
            name: "sample-no-requests".into(),
            uid: "00000000-0000-0000-0000-000000000003".into(),
            cpu_request_millis: 0,
            memory_request_bytes: 0,
            ..cpu_pod.clone()
        };
        [cpu_pod, gpu_pod, without_requests]
            .into_iter()
            .map(|pod| MapPodInput { pod, cluster: cluster.clone() })
            .collect()
    }

    fn summarize_input(input: &MapPodInput) -> String {
        let pod = &input.pod;
        format!(
            "pod {}/{} cpu={}m memory={}Mi gpus={} annotations={}",
            pod.namespace,
            pod.name,
            pod.cpu_request_millis,
            pod.memory_request_bytes >> 20,
            pod.gpus,
            pod.annotations.len()
        )
    }

    fn summarize_output(output: &Mapping) -> String {
        match output {
            Mapping::Job(job) => {
                let mut summary = format!("job cpus={} memory={}Mi", job.cpus, job.memory_mib);
                let fields = [
                    ("partition", &job.partition),
                    ("account", &job.account),
                    ("qos", &job.qos),
                    ("constraints", &job.constraints),
                    ("tres", &job.tres_per_node),
                ];
                for (name, value) in fields {
                    if let Some(value) = value {
                        summary.push_str(&format!(" {name}={value}"));
                    }
                }
                summary
            }
            Mapping::Reject(rejection) => format!("reject {}: {}", rejection.field, rejection.message),
        }
    }
}

/// Every string of a job request.
fn job_texts(job: &JobRequest) -> impl Iterator<Item = &str> {
    let optional = [
        &job.partition,
        &job.account,
        &job.qos,
        &job.reservation,
        &job.comment,
        &job.constraints,
        &job.prefer,
        &job.current_working_directory,
        &job.tres_per_node,
    ];
    optional.into_iter().flatten().chain(job.excluded_nodes.iter()).chain(job.required_nodes.iter()).map(String::as_str)
}

impl Module<JobMapperWorld> {
    /// Runs `map-pod` in a fresh store.
    pub fn map_pod(&self, pod: &Pod, cluster: &Cluster) -> Result<Mapping, PolicyError> {
        self.decide(&MapPodInput { pod: pod.clone(), cluster: cluster.clone() })
    }
}

#[cfg(test)]
#[path = "job_mapper_tests.rs"]
mod tests;
