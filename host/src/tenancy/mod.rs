//! Tenancy: what each namespace's pods may get in Slurm, owned by the operator and enforced on
//! whatever the job-mapper policy asks for.

mod enforce;
mod grant;

pub use enforce::{NotGranted, enforce, preemption_rank};
pub use grant::{
    GivenUid, Grant, GrantName, IdRange, NOBODY, NamespaceGrant, NamespaceSelector, Preemptable, Tenancy, TenancyError,
};
