//! How many bytes the host has allocated and not freed (`sunk_heap_bytes`): its live heap. The
//! process's RSS is that and whatever the allocator keeps for later, and at scale the two differ by
//! a factor (docs/benchmarks.md, scale-bench): the count says which one grew.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

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
