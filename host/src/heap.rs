//! The host's heap: glibc's allocator tuned to give back what a burst freed, and how many bytes the
//! host has allocated and not freed (`sunk_heap_bytes`), its live heap. The process's RSS is that
//! and whatever the allocator keeps for later; untuned, under 10,000 arriving pods, the two differ
//! by a factor of three (docs/benchmarks.md, scale-bench), and the count says which one grew.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

/// Limits glibc's per-thread arenas to one per core (each keeps what its threads freed, up to 8 per
/// core by default) and serves every block over 128 KiB (a listing of 5,000 nodes is 13 MB) from its
/// own mapping, returned when freed, instead of raising that bar after each such free as glibc does
/// by default. Call first thing in `main`, before any thread starts.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let arenas = libc::c_int::try_from(crate::cores()).unwrap_or(2);
        // SAFETY: mallopt only sets the allocator's parameters; no thread allocates concurrently yet.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, arenas);
            libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
        }
    }
}

/// Hands the pages freed since the last call back to the system every `interval`: glibc keeps freed
/// memory inside its heaps until asked, so a burst's high-water mark would stay resident for good.
pub async fn give_back_freed_memory(interval: std::time::Duration) {
    let mut ticker = tokio::time::interval(interval);
    loop {
        ticker.tick().await;
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: malloc_trim is thread-safe; it releases free pages only.
        unsafe {
            libc::malloc_trim(0);
        }
    }
}

static LIVE: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting the bytes it holds for the program. The binary makes it the global
/// allocator.
pub struct CountingAllocator;

// SAFETY: every call is passed to the system allocator unchanged; only a counter is updated beside it.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as the caller promised for `layout`.
        let pointer = unsafe { System.alloc(layout) };
        if !pointer.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        pointer
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as the caller promised for `layout`.
        let pointer = unsafe { System.alloc_zeroed(layout) };
        if !pointer.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: `pointer` came from this allocator with `layout`, as the caller promised.
        unsafe { System.dealloc(pointer, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as the caller promised for `pointer`, `layout` and `new_size`.
        let moved = unsafe { System.realloc(pointer, layout, new_size) };
        if !moved.is_null() {
            LIVE.fetch_add(new_size, Ordering::Relaxed);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        moved
    }
}

/// Bytes allocated and not yet freed (0 where the binary did not install [`CountingAllocator`]).
pub fn live_bytes() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// `sunk_heap_bytes`, read as it is scraped.
#[derive(Debug)]
struct LiveHeap;

impl TypedMetric for LiveHeap {
    const TYPE: MetricType = MetricType::Gauge;
}

impl EncodeMetric for LiveHeap {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_gauge(&i64::try_from(live_bytes()).unwrap_or(i64::MAX))
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

pub fn register(registry: &mut Registry) {
    registry.register("sunk_heap_bytes", "Bytes the host has allocated and not freed (its live heap)", LiveHeap);
}
