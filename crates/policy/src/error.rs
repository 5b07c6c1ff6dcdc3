//! How a decision fails.

use wasmtime::Trap;

use super::engine::MemoryLimitExceeded;

/// Why a policy gave no decision. Each affects only the decision at hand: the module stays loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// The module trapped (a panic, `unreachable`, a stack overflow, ...).
    #[error("policy trapped: {0}")]
    Trap(String),
    /// The decision used up its fuel: it did more work than one decision may (an endless loop, say).
    /// Counts work, not time, so it does not depend on how busy the host is.
    #[error("policy ran out of fuel: it did more work than one decision may")]
    OutOfFuel,
    /// The decision ran past the wall-clock backstop (seconds; see [`super::Limits::time`]) before its
    /// fuel ran out: only a host starved for CPU for that long gets here.
    #[error("policy ran out of time")]
    Timeout,
    /// The module tried to grow its memory past the limit.
    #[error("policy ran out of memory")]
    OutOfMemory,
    /// The module broke the interface contract: it could not be instantiated or returned an invalid
    /// value.
    #[error("policy broke its contract: {0}")]
    Invalid(String),
    /// No module may decide: one the operator uploaded is not live (refused, its bytes missing), and
    /// neither the module before it nor the bundled default may stand in for it.
    #[error("{0}")]
    Withheld(String),
}

impl PolicyError {
    /// Classifies an error from instantiating or calling a module. `last_error_log` is the last line
    /// the module logged at warn or error level (a panic message, usually).
    pub(crate) fn from_wasmtime(error: &wasmtime::Error, last_error_log: Option<&str>) -> Self {
        if error.downcast_ref::<MemoryLimitExceeded>().is_some() {
            return Self::OutOfMemory;
        }
        match error.downcast_ref::<Trap>() {
            Some(Trap::OutOfFuel) => Self::OutOfFuel,
            Some(Trap::Interrupt) => Self::Timeout,
            Some(trap) => Self::Trap(match last_error_log {
                Some(line) => format!("{trap} (last logged: {line})"),
                None => trap.to_string(),
            }),
            None => Self::Invalid(format!("{error:#}")),
        }
    }
}
