//! A client for slurmrestd that knows nothing of Kubernetes or policies (Cargo enforces it: this crate
//! depends on neither), and the one shared cache of Slurm's nodes. It speaks the newest data parser
//! version both it and the slurmrestd know ([`SPEAKS`]: v0.0.44 on Slurm 26.05, v0.0.42 on 24.11).
//!
//! It signs its own short-lived JWTs from the cluster's `jwt.key`, so no token Secret needs rotating.

mod api;
mod auth;
mod client;
mod decode;
mod error;
#[cfg(feature = "fake")]
mod fake;
mod hostlist;
mod job_states;
mod listing;
mod model;
mod node;
mod node_cache;
mod preemption;
mod reconnect;
mod resources;
mod shared_text;
mod version;

pub use api::{JobId, Slurm};
pub use auth::{TOKEN_LIFETIME, TokenSigner};
pub use client::{DEFAULT_MAX_IN_FLIGHT, JobsPage, NodesPage, REQUEST_TIMEOUT, SUBMIT_DEADLINE, SlurmClient};
pub use decode::{MAX_JOBS_ANSWER_BYTES, MAX_NODES_ANSWER_BYTES, MAX_OTHER_ANSWER_BYTES};
pub use error::SlurmError;
#[cfg(feature = "fake")]
pub use fake::FakeSlurm;
pub use hostlist::{
    HostlistError, compress as compress_hostlist, expand as expand_hostlist, expand_all as expand_hostlists,
    for_each as for_each_host,
};
pub use job_states::{JobStates, JobStatesListing};
pub use model::{ApiMessage, Exclusive, Job, JobDescription, JobFlag, JobState, JobUpdate, NoValue, array_task_ids};
pub use node::{Node, NodeFlags, NodeUpdate};
pub use node_cache::{
    ChangedNode, NodeCache, NodeCacheConfig, NodeChange, NodeSnapshot, NodeSource, Pace, SlurmView, Unreadable,
};
pub use preemption::{
    Partition, PartitionPreemptMode, PartitionPriority, PartitionQos, PreemptModes, PreemptionConf, PreemptionSetup,
    Qos, QosPreempt,
};
pub use reconnect::rediscover_after_reconnects;
pub use resources::Resources;
pub use shared_text::SharedText;
pub use version::{ApiVersion, NoCommonApi, SPEAKS, SlurmInfo, SlurmInfoMetric};
