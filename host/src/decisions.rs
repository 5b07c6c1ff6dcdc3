//! Policy decisions, run off the threads that drive I/O and a few at a time.
//!
//! A decision may compute for its whole fuel budget, so it runs under `block_in_place`, which hands
//! the async worker's other tasks to a thread of the blocking pool. Unbounded, a burst of 10,000 pods
//! arriving at once has the runtime start its most blocking threads (512), each with a stack and an
//! allocator arena of its own, and the pool's Wasm instance slots touched by as many decisions at
//! once stay resident. So at most one decision per core runs at a time; the others wait here, asleep.

use std::sync::LazyLock;

use tokio::sync::Semaphore;

static RUNNING: LazyLock<Semaphore> = LazyLock::new(|| Semaphore::new(crate::cores()));

/// Runs `decide` (a policy decision) once a core is free for it, off the async workers.
pub async fn off_io<T>(decide: impl FnOnce() -> T) -> T {
    // The semaphore is never closed, so acquiring only waits.
    let _running = RUNNING.acquire().await.expect("the decision semaphore is never closed");
    tokio::task::block_in_place(decide)
}
