//! The default policies compiled into the binary (built by `host/build.rs`).

/// The bundled job-mapper component.
pub(crate) const JOB_MAPPER: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/job_mapper.wasm"));
