//! A loaded policy module: compiled, checked, ready to decide.

use std::marker::PhantomData;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};
use wasmtime::component::Component;

use super::engine::{Limits, Runtime};
use super::error::PolicyError;
use super::host::HostState;
use super::imports;
use super::world::World;

/// A compiled module of world `W`: cheap to clone and shareable across threads; every
/// [`Module::decide`] runs in a fresh sandbox.
pub struct Module<W: World> {
    inner: Arc<Inner<W>>,
    limits: Limits,
}

struct Inner<W: World> {
    /// Keeps the engine (and its epoch ticker) alive while the module is.
    runtime: Arc<Runtime>,
    pre: W::Pre,
    digest: Arc<str>,
    config: Option<Arc<str>>,
    size: usize,
    _world: PhantomData<W>,
}

impl<W: World> Clone for Module<W> {
    fn clone(&self) -> Self {
        Module { inner: self.inner.clone(), limits: self.limits }
    }
}

impl<W: World> std::fmt::Debug for Module<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module")
            .field("world", &W::NAME)
            .field("digest", &self.digest())
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl<W: World> Module<W> {
    /// The default of this world compiled into the binary, without configuration.
    pub fn bundled() -> Result<Self> {
        Self::load(W::bundled(), None).with_context(|| format!("loading the bundled {} policy", W::NAME))
    }

    /// Compiles a component (the bytes of a `.wasm` component, not a core module) and checks that it
    /// imports nothing but `sunk:policy/host` and exports world `W`. `config` is what the module's
    /// `config()` import returns. Compiling takes tens of milliseconds: call it off the async runtime.
    pub fn load(bytes: &[u8], config: Option<String>) -> Result<Self> {
        if bytes.starts_with(b"\0asm\x01\0\0\0") {
            bail!(
                "this is a core WebAssembly module, not a component; build it with `sunk policy build` \
                 (or turn it into one with `wasm-tools component new`)"
            );
        }
        let runtime = Runtime::shared()?;
        let component = Component::new(&runtime.engine, bytes).map_err(|e| wasm_error(e, "compiling"))?;
        imports::check(&component, &runtime.engine)?;
        let instance = runtime.linker.instantiate_pre(&component).map_err(|e| wasm_error(e, "linking"))?;
        let pre = W::pre(instance)
            .map_err(|e| wasm_error(e, &format!("finding the export `{}` of world `{}` in", W::EXPORT, W::NAME)))?;
        let inner = Inner {
            digest: sha256_hex(bytes).into(),
            config: config.map(Arc::from),
            size: bytes.len(),
            runtime,
            pre,
            _world: PhantomData,
        };
        Ok(Module { inner: Arc::new(inner), limits: Limits::default() })
    }

    /// The same module, run with other limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The limits each decision runs with.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// sha256 of the component's bytes, 64 lowercase hex digits.
    pub fn digest(&self) -> &str {
        &self.inner.digest
    }

    /// Size of the component in bytes.
    pub fn size(&self) -> usize {
        self.inner.size
    }

    /// Runs the export in a fresh store and checks the result.
    pub fn decide(&self, input: &W::Input) -> Result<W::Output, PolicyError> {
        let inner = &self.inner;
        let host = HostState::new(inner.digest.clone(), W::EXPORT, inner.config.clone());
        let mut store = inner.runtime.store(host, self.limits);
        let result = W::call(&inner.pre, &mut store, input);
        let output = result.map_err(|error| PolicyError::from_wasmtime(&error, store.data().host.last_error_log()))?;
        W::check(input, &output)
            .map_err(|problem| PolicyError::Invalid(format!("{} returned {problem}", W::EXPORT)))?;
        Ok(output)
    }

    /// Runs every sample input of the world: what a module must pass before it goes live.
    pub fn dry_run(&self) -> Result<()> {
        for (index, input) in W::samples().iter().enumerate() {
            self.decide(input)
                .with_context(|| format!("dry run on sample input {index} ({}) failed", W::summarize_input(input)))?;
        }
        Ok(())
    }
}

/// A wasmtime error as an `anyhow` one, saying what was being done to the component.
fn wasm_error(error: wasmtime::Error, doing: &str) -> anyhow::Error {
    anyhow::Error::from(error).context(format!("{doing} the policy component"))
}

/// sha256 of `bytes` as 64 lowercase hex digits: how modules are named and pinned.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The names a component imports and exports, for `sunk policy check`.
pub fn component_interface(bytes: &[u8]) -> Result<(Vec<String>, Vec<String>)> {
    let runtime = Runtime::shared()?;
    let component = Component::new(&runtime.engine, bytes).map_err(|e| wasm_error(e, "compiling"))?;
    let ty = component.component_type();
    let imports = ty.imports(&runtime.engine).map(|(name, _)| name.to_owned()).collect();
    let exports = ty.exports(&runtime.engine).map(|(name, _)| name.to_owned()).collect();
    Ok((imports, exports))
}
