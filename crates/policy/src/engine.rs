//! The one wasmtime [`Engine`] and [`Linker`] all policies share, the per-decision limits, and the
//! epoch ticker behind the wall-clock backstop.
//!
//! A decision's work is bounded by fuel, which counts WebAssembly operators: the same decision uses the
//! same fuel however busy the machine is, so a policy never falls back because the host was starved.
//! Wall-clock time is only a generous backstop, far beyond what the fuel budget takes on a loaded core.

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::thread;
use std::time::Duration;

use anyhow::{Context, Result};
use wasmtime::component::Linker;
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, ResourceLimiter, Store, StoreLimits,
    StoreLimitsBuilder,
};

use super::host::{self, HostState};

/// How often the ticker advances the engine's epoch: the granularity of the wall-clock backstop, which
/// is seconds, so the ticker need not wake more often.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Fuel (about one unit per WebAssembly operator) one decision may use by default. The bundled and
/// example policies use under 30 000 per decision (0.03 %), the abuse suite's 10 000-line logger 7 %;
/// an endless loop runs it down in about 0.1 s of a core, the old time budget.
const DEFAULT_FUEL: u64 = 100_000_000;

/// The most linear memory any decision can be given: the size of a memory slot in the instance pool.
/// [`Limits::memory_bytes`] above it is capped to it.
const MAX_MEMORY_BYTES: usize = 256 << 20;

/// Instances the pool holds at once: more decisions than this running at the same moment fail to
/// instantiate (and fall back), rather than exhaust the host's memory.
const POOLED_INSTANCES: u32 = 1000;

/// Bytes at the start of a memory slot that are reset in place (zeroed, or only the pages a decision
/// dirtied where the kernel offers `PAGEMAP_SCAN`) instead of being unmapped: a policy's stack (64 KiB
/// as `sunk policy build` links it) and data then cost no page faults in the next decision.
const KEEP_RESIDENT_BYTES: usize = 512 << 10;

/// What one decision may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of linear memory the module may grow to.
    pub memory_bytes: usize,
    /// Fuel one decision may use (instantiation included): its budget of work. Running out is
    /// [`PolicyError::OutOfFuel`](super::PolicyError::OutOfFuel).
    pub fuel: u64,
    /// Wall-clock time one decision may take (instantiation included), to within 10 ms: a
    /// backstop only, so generous that the fuel budget runs out long before it on any machine that is
    /// merely busy. Running out is [`PolicyError::Timeout`](super::PolicyError::Timeout).
    pub time: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self { memory_bytes: 64 << 20, fuel: DEFAULT_FUEL, time: Duration::from_secs(10) }
    }
}

impl Limits {
    /// Epoch ticks covering the time budget (at least one).
    fn deadline_ticks(&self) -> u64 {
        let ticks = self.time.as_nanos().div_ceil(EPOCH_TICK.as_nanos());
        u64::try_from(ticks).unwrap_or(u64::MAX).max(1)
    }
}

/// The engine and linker policies run in. Shared by every loaded module while any is alive; the epoch
/// ticker stops once the engine is dropped.
pub(crate) struct Runtime {
    pub engine: Engine,
    pub linker: Linker<StoreState>,
}

/// What a decision's store holds: the state behind the host imports, and the limiter.
pub struct StoreState {
    pub(crate) host: HostState,
    limiter: Limiter,
}

impl Runtime {
    /// The runtime in use, or a new one when no module holds it any more.
    pub fn shared() -> Result<Arc<Runtime>> {
        static SHARED: Mutex<Weak<Runtime>> = Mutex::new(Weak::new());
        let mut shared = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(runtime) = shared.upgrade() {
            return Ok(runtime);
        }
        let runtime = Arc::new(Runtime::new()?);
        *shared = Arc::downgrade(&runtime);
        Ok(runtime)
    }

    fn new() -> Result<Runtime> {
        let mut config = Config::new();
        config
            .wasm_component_model(true)
            .consume_fuel(true)
            .epoch_interruption(true)
            // Policies export synchronous functions only; this makes calls several times cheaper.
            .concurrency_support(false)
            // A fresh instance per decision costs a few microseconds from a pool of pre-reserved,
            // reset-on-release slots, against tens of microseconds of mmap/munmap without one.
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool()));
        let engine = Engine::new(&config)?;
        let mut linker = Linker::new(&engine);
        host::add_to_linker(&mut linker, |state: &mut StoreState| &mut state.host)?;
        let _detached = spawn_ticker(&engine)?;
        Ok(Runtime { engine, linker })
    }

    /// A fresh store for one decision, with `limits` applied.
    pub fn store(&self, host: HostState, limits: Limits) -> wasmtime::Result<Store<StoreState>> {
        let limiter = Limiter::new(limits.memory_bytes);
        let mut store = Store::new(&self.engine, StoreState { host, limiter });
        store.limiter(|state| &mut state.limiter);
        store.set_fuel(limits.fuel)?;
        store.set_epoch_deadline(limits.deadline_ticks());
        Ok(store)
    }
}

/// The instance pool: [`POOLED_INSTANCES`] component instances, each with a little room for the glue
/// instances `wit-component` adds, memory slots of [`MAX_MEMORY_BYTES`].
fn pool() -> PoolingAllocationConfig {
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(POOLED_INSTANCES)
        .total_core_instances(4 * POOLED_INSTANCES)
        .total_memories(POOLED_INSTANCES)
        .total_tables(4 * POOLED_INSTANCES)
        .max_memory_size(MAX_MEMORY_BYTES)
        .linear_memory_keep_resident(KEEP_RESIDENT_BYTES)
        .table_keep_resident(KEEP_RESIDENT_BYTES);
    pool
}

/// Advances the epoch every [`EPOCH_TICK`] until the engine is dropped.
fn spawn_ticker(engine: &Engine) -> Result<thread::JoinHandle<()>> {
    let engine = engine.weak();
    thread::Builder::new()
        .name("policy-epoch".to_owned())
        .spawn(move || {
            loop {
                thread::sleep(EPOCH_TICK);
                match engine.upgrade() {
                    Some(engine) => engine.increment_epoch(),
                    None => break,
                }
            }
        })
        .context("starting the policy epoch ticker")
}

/// Raised (as the guest's trap) when a module grows its memory past the limit, so that running out of
/// memory is told apart from other traps by type.
#[derive(Debug, thiserror::Error)]
#[error("memory limit exceeded: the module asked for {desired} bytes, the limit is {limit}")]
pub(crate) struct MemoryLimitExceeded {
    desired: usize,
    limit: usize,
}

/// [`StoreLimits`] (few instances, tables and memories; trap on failed growth) with a memory limit
/// that fails with [`MemoryLimitExceeded`].
struct Limiter {
    memory_bytes: usize,
    inner: StoreLimits,
}

impl Limiter {
    fn new(memory_bytes: usize) -> Self {
        let inner = StoreLimitsBuilder::new()
            .memory_size(memory_bytes)
            .table_elements(1 << 16)
            .instances(32)
            .tables(32)
            .memories(8)
            .trap_on_grow_failure(true)
            .build();
        Limiter { memory_bytes, inner }
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            return Err(MemoryLimitExceeded { desired, limit: self.memory_bytes }.into());
        }
        self.inner.memory_growing(current, desired, maximum)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.inner.memory_grow_failed(error)
    }

    fn table_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        self.inner.table_growing(current, desired, maximum)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.inner.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.inner.instances()
    }

    fn tables(&self) -> usize {
        self.inner.tables()
    }

    fn memories(&self) -> usize {
        self.inner.memories()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_covers_the_budget() {
        let limits = |time| Limits { time, ..Limits::default() };
        assert_eq!(Limits::default().deadline_ticks(), 1000);
        assert_eq!(limits(Duration::ZERO).deadline_ticks(), 1);
        assert_eq!(limits(Duration::from_millis(15)).deadline_ticks(), 2);
        assert_eq!(limits(Duration::MAX).deadline_ticks(), u64::MAX);
    }

    #[test]
    fn ticker_stops_with_the_engine() {
        let engine = Engine::default();
        let ticker = spawn_ticker(&engine).unwrap();
        drop(engine);
        ticker.join().unwrap();
    }

    #[test]
    fn runtime_is_shared_while_alive() {
        let a = Runtime::shared().unwrap();
        let b = Runtime::shared().unwrap();
        assert!(Arc::ptr_eq(&a, &b));
    }
}
