//! The default policies compiled into the binary (built by `host/build.rs`).

/// The bundled job-mapper component.
pub(crate) const JOB_MAPPER: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/job_mapper.wasm"));
/// The bundled preemption component.
pub(crate) const PREEMPTION: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/preemption.wasm"));
/// The bundled drain component.
pub(crate) const DRAIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/drain.wasm"));

/// Hostile modules for the abuse suite (`tests/policies/`).
#[cfg(test)]
pub(crate) mod fixtures {
    /// A job-mapper that misbehaves as its configuration says.
    pub const ABUSE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/abuse.wasm"));
    /// A job-mapper built for wasm32-wasip2: it imports WASI.
    pub const WASI_IMPORT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/wasi_import.wasm"));
    /// The example job-mapper `examples/policies/team-accounts`, and the configuration it ships with.
    pub const TEAM_ACCOUNTS: (&[u8], &str) = (
        include_bytes!(concat!(env!("OUT_DIR"), "/team_accounts.wasm")),
        include_str!("../../../examples/policies/team-accounts/config.example"),
    );
    /// The example drain policy `examples/policies/drain-runbook`, and its configuration.
    pub const DRAIN_RUNBOOK: (&[u8], &str) = (
        include_bytes!(concat!(env!("OUT_DIR"), "/drain_runbook.wasm")),
        include_str!("../../../examples/policies/drain-runbook/config.example"),
    );
}
