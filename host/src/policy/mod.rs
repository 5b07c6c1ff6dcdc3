//! The WebAssembly policy runtime.
