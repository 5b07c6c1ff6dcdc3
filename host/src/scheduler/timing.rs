//! How long the scheduler waits before it looks at a pod again, in one place: each step returns one
//! of these with its decision instead of choosing a number of its own.

use std::time::Duration;

/// A second look when nothing is expected to change the pod sooner (a watch event, a change of
/// Slurm's jobs or nodes, or another member of its group brings it back earlier).
pub const RECHECK: Duration = Duration::from_secs(60);
/// Soon again, after something that should pass (a conflict, a job not listed yet, Slurm busy).
pub const RETRY: Duration = Duration::from_secs(5);
/// How long a job listing may go unanswered before waiting pods say Slurm cannot be reached.
pub const SLURM_PATIENCE: Duration = Duration::from_secs(10);
