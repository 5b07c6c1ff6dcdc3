//! A loaded policy module: compiled, checked, ready to decide.

use std::marker::PhantomData;
use std::sync::Arc;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use wasmtime::component::Component;

use super::engine::{Limits, Runtime};
use super::error::PolicyError;
use super::host::HostState;
use super::imports;
use super::preamble;
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
        Compiled::new(bytes)?.module(config)
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
        self.metered(input).0
    }

    /// [`Module::decide`], and the fuel the decision used (all of it when it ran out): the same for the
    /// same input, however busy the machine is.
    pub fn metered(&self, input: &W::Input) -> (Result<W::Output, PolicyError>, u64) {
        let inner = &self.inner;
        let host = HostState::new(inner.digest.clone(), W::EXPORT, inner.config.clone());
        let mut store = match inner.runtime.store(host, self.limits) {
            Ok(store) => store,
            Err(error) => return (Err(PolicyError::from_wasmtime(&error, None)), 0),
        };
        let result = W::call(&inner.pre, &mut store, input);
        let fuel = self.limits.fuel.saturating_sub(store.get_fuel().unwrap_or(0));
        let output = result
            .map_err(|error| PolicyError::from_wasmtime(&error, store.data().host.last_error_log()))
            .and_then(|output| {
                W::check(input, &output)
                    .map_err(|problem| PolicyError::Invalid(format!("{} returned {problem}", W::EXPORT)))?;
                Ok(output)
            });
        (output, fuel)
    }

    /// Runs every sample input of the world: what a module must pass before it goes live. Returns the
    /// most fuel any of them used.
    pub fn dry_run(&self) -> Result<u64> {
        let mut most = 0;
        for (index, input) in W::samples().iter().enumerate() {
            let (result, fuel) = self.metered(input);
            result
                .with_context(|| format!("dry run on sample input {index} ({}) failed", W::summarize_input(input)))?;
            most = most.max(fuel);
        }
        Ok(most)
    }
}

/// A compiled component not yet bound to a world. Compiling is nearly all the cost of loading, so a
/// caller that does not know the world yet (`sunk policy check`) compiles once and tries each world.
pub struct Compiled {
    runtime: Arc<Runtime>,
    component: Component,
    digest: Arc<str>,
    size: usize,
}

impl Compiled {
    /// Compiles the bytes of a `.wasm` component (not a core module).
    pub fn new(bytes: &[u8]) -> Result<Self> {
        preamble::check(bytes)?;
        let runtime = Runtime::shared()?;
        let component = Component::new(&runtime.engine, bytes).map_err(|e| wasm_error(e, "compiling"))?;
        Ok(Compiled { runtime, component, digest: sha256_hex(bytes).into(), size: bytes.len() })
    }

    /// The component as a module of world `W`, once it is checked to import nothing but
    /// `sunk:policy/host` and to export `W`. `config` is what the module's `config()` import returns.
    pub fn module<W: World>(&self, config: Option<String>) -> Result<Module<W>> {
        imports::check(&self.component, &self.runtime.engine)?;
        let instance = self.runtime.linker.instantiate_pre(&self.component).map_err(|e| wasm_error(e, "linking"))?;
        let pre = W::pre(instance)
            .map_err(|e| wasm_error(e, &format!("finding the export `{}` of world `{}` in", W::EXPORT, W::NAME)))?;
        let inner = Inner {
            runtime: self.runtime.clone(),
            pre,
            digest: self.digest.clone(),
            config: config.map(Arc::from),
            size: self.size,
            _world: PhantomData,
        };
        Ok(Module { inner: Arc::new(inner), limits: Limits::default() })
    }

    /// The names the component imports and exports, for `sunk policy check`.
    pub fn interface(&self) -> (Vec<String>, Vec<String>) {
        let (engine, ty) = (&self.runtime.engine, self.component.component_type());
        let imports = ty.imports(engine).map(|(name, _)| name.to_owned()).collect();
        let exports = ty.exports(engine).map(|(name, _)| name.to_owned()).collect();
        (imports, exports)
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
