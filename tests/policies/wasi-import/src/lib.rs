//! A job-mapper that reads an environment variable: built for `wasm32-wasip2`, it imports WASI, which
//! the host must refuse at load, naming the import.

wit_bindgen::generate!({
    world: "job-mapper",
    path: "../../../wit",
});

use sunk::policy::job_types::Rejection;

struct Policy;

impl Guest for Policy {
    fn map_pod(_pod: Pod, _cluster: Cluster) -> Mapping {
        let secret = std::env::var("SECRET").unwrap_or_default();
        Mapping::Reject(Rejection { field: "env".into(), message: secret })
    }
}

export!(Policy);
