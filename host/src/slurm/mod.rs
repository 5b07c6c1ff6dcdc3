//! A client for slurmrestd (data parser v0.0.42) that knows nothing of Kubernetes or policies.
//!
//! It signs its own short-lived JWTs from the cluster's `jwt.key`, so no token Secret needs rotating.

mod auth;
mod client;
mod error;
mod model;

pub use auth::TokenSigner;
pub use client::{JobsPage, SlurmClient};
pub use error::SlurmError;
pub use model::{ApiMessage, Exclusive, Job, JobDescription, JobState, NoValue, Node};
