//! The `sunk:policy/host` interface: what the host lends every policy (a log and its configuration).

use std::sync::Arc;

use anyhow::Result;
use wasmtime::component::{HasSelf, Linker};

use super::bindings::{HostSide, common, drain_types, host, job_types, preemption_types};

/// Lines one decision may log; further lines are dropped (with one warning).
const MAX_LOG_LINES: u32 = 64;
/// Longest log line kept; longer ones are cut.
const MAX_LOG_LINE_BYTES: usize = 4096;

/// The state behind a decision's host imports.
pub(crate) struct HostState {
    /// sha256 of the module, tagging its log lines.
    digest: Arc<str>,
    /// The decision point (the export being called), tagging log lines.
    decision: &'static str,
    config: Option<Arc<str>>,
    log_lines: u32,
    last_error_log: Option<String>,
}

impl HostState {
    pub fn new(digest: Arc<str>, decision: &'static str, config: Option<Arc<str>>) -> Self {
        HostState { digest, decision, config, log_lines: 0, last_error_log: None }
    }

    /// The last line the module logged at warn or error level (e.g. its panic message).
    pub fn last_error_log(&self) -> Option<&str> {
        self.last_error_log.as_deref()
    }
}

/// Adds the host interface (and the types-only interfaces of the package) to `linker`.
pub(crate) fn add_to_linker<T: 'static>(linker: &mut Linker<T>, get: fn(&mut T) -> &mut HostState) -> Result<()> {
    HostSide::add_to_linker::<T, HasSelf<HostState>>(linker, get)?;
    Ok(())
}

impl host::Host for HostState {
    fn log(&mut self, level: host::LogLevel, mut message: String) {
        self.log_lines += 1;
        if self.log_lines > MAX_LOG_LINES {
            if self.log_lines == MAX_LOG_LINES + 1 {
                let (policy, decision) = (&*self.digest, self.decision);
                tracing::warn!(
                    policy,
                    decision,
                    "policy logged more than {MAX_LOG_LINES} lines in one decision; dropping the rest"
                );
            }
            return;
        }
        if message.len() > MAX_LOG_LINE_BYTES {
            let mut cut = MAX_LOG_LINE_BYTES;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
            message.push('…');
        }
        let (policy, decision) = (&*self.digest, self.decision);
        match level {
            host::LogLevel::Trace => tracing::trace!(policy, decision, "{message}"),
            host::LogLevel::Debug => tracing::debug!(policy, decision, "{message}"),
            host::LogLevel::Info => tracing::info!(policy, decision, "{message}"),
            host::LogLevel::Warn => tracing::warn!(policy, decision, "{message}"),
            host::LogLevel::Error => tracing::error!(policy, decision, "{message}"),
        }
        if matches!(level, host::LogLevel::Warn | host::LogLevel::Error) {
            self.last_error_log = Some(message);
        }
    }

    fn config(&mut self) -> Option<String> {
        self.config.as_deref().map(str::to_owned)
    }
}

// The other interfaces hold only types; a component still imports them, so they are linked.
impl common::Host for HostState {}
impl job_types::Host for HostState {}
impl preemption_types::Host for HostState {}
impl drain_types::Host for HostState {}
