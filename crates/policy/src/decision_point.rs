//! A decision point: the live module of one world, the bundled default behind it, and the swap
//! between versions.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Result;
use arc_swap::ArcSwap;

use super::error::PolicyError;
use super::metrics::{Outcome, PolicyLabels, PolicyMetrics, ReloadResult};
use super::module::Module;
use super::world::World;

/// What happens to a decision when the live module fails it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnFailure {
    /// The bundled default decides instead (an operator's opt-in: the default is more permissive
    /// than most modules that replace it).
    Fallback,
    /// The decision fails; the caller keeps the object waiting and retries.
    #[default]
    FailClosed,
}

/// Where a module came from; names it in metrics, logs and status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Compiled into the binary.
    Bundled,
    /// A file of the policy directory.
    File(String),
    /// A `PolicyModule` resource.
    Resource(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Bundled => f.write_str("bundled"),
            Source::File(path) => write!(f, "file/{path}"),
            Source::Resource(name) => write!(f, "policymodule/{name}"),
        }
    }
}

/// A module and where it came from.
pub struct Live<W: World> {
    pub module: Module<W>,
    pub source: Source,
    labels: PolicyLabels,
}

impl<W: World> Live<W> {
    fn new(module: Module<W>, source: Source) -> Arc<Self> {
        let labels =
            PolicyLabels { decision: W::NAME, policy: source.to_string(), digest: module.digest()[..12].to_owned() };
        Arc::new(Live { module, source, labels })
    }
}

/// One decision point. Decisions read the live module without locking; a swap replaces it atomically,
/// so decisions already running finish on the version they started with.
pub struct DecisionPoint<W: World> {
    live: ArcSwap<Live<W>>,
    previous: Mutex<Option<Arc<Live<W>>>>,
    bundled: Arc<Live<W>>,
    on_failure: OnFailure,
    metrics: PolicyMetrics,
    /// Who withholds every decision and why, while an operator's module is not live.
    withheld: Mutex<Option<(Source, String)>>,
    /// How many times the live module was replaced (see [`Self::revision`]).
    revision: AtomicU64,
}

impl<W: World> DecisionPoint<W> {
    /// A decision point running the bundled default.
    pub fn bundled(on_failure: OnFailure, metrics: PolicyMetrics) -> Result<Self> {
        let bundled = Live::new(Module::bundled()?, Source::Bundled);
        Ok(DecisionPoint {
            live: ArcSwap::new(bundled.clone()),
            previous: Mutex::new(None),
            bundled,
            on_failure,
            metrics,
            withheld: Mutex::new(None),
            revision: AtomicU64::new(0),
        })
    }

    /// Decides with the live module. When it fails and the point falls back, the bundled default
    /// decides; the failure is counted and logged either way.
    pub fn decide(&self, input: &W::Input) -> Result<W::Output, PolicyError> {
        let live = self.live.load_full();
        if let Some((_, why)) = self.withheld.lock().unwrap_or_else(PoisonError::into_inner).clone() {
            self.metrics.count(&live.labels, Outcome::withheld);
            return Err(PolicyError::Withheld(why));
        }
        let result = self.run(&live, input);
        let Err(error) = result else {
            return result;
        };
        if self.on_failure == OnFailure::FailClosed || Arc::ptr_eq(&live, &self.bundled) {
            return Err(error);
        }
        self.metrics.count(&live.labels, Outcome::fallback);
        tracing::warn!(decision = W::NAME, policy = %live.source, %error, "policy failed; the bundled default decides");
        self.run(&self.bundled, input)
    }

    /// Runs one decision on `live`, counting and logging it.
    fn run(&self, live: &Live<W>, input: &W::Input) -> Result<W::Output, PolicyError> {
        let start = Instant::now();
        let result = live.module.decide(input);
        let elapsed = start.elapsed();
        let outcome = match &result {
            Ok(output) if W::is_rejection(output) => Outcome::rejected,
            Ok(_) => Outcome::ok,
            Err(PolicyError::Trap(_)) => Outcome::trap,
            Err(PolicyError::OutOfFuel) => Outcome::out_of_fuel,
            Err(PolicyError::Timeout) => Outcome::timeout,
            Err(PolicyError::OutOfMemory) => Outcome::out_of_memory,
            Err(PolicyError::Invalid(_)) => Outcome::invalid,
            Err(PolicyError::Withheld(_)) => Outcome::withheld,
        };
        self.metrics.observe(&live.labels, outcome, elapsed.as_secs_f64());
        log_decision(live, input, &result, outcome, elapsed);
        result
    }

    /// The module deciding now.
    pub fn live(&self) -> Arc<Live<W>> {
        self.live.load_full()
    }

    /// Changes whenever another module goes live (swap, rollback, reset): a caller that remembers a
    /// decision may reuse it while the revision stays the same.
    pub fn revision(&self) -> u64 {
        self.revision.load(Ordering::Acquire)
    }

    /// The module that was live before the last swap, kept for rollback.
    pub fn previous(&self) -> Option<Arc<Live<W>>> {
        self.previous.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Dry-runs `module` on the world's sample inputs and, only if it answers them all, makes it the
    /// live module; the one it replaces is kept as the previous version. Blocks for the dry run.
    pub fn swap(&self, module: Module<W>, source: Source) -> Result<()> {
        if let Err(error) = module.dry_run() {
            self.metrics.reloaded(W::NAME, ReloadResult::refused);
            return Err(error);
        }
        self.replace(Live::new(module, source));
        self.metrics.reloaded(W::NAME, ReloadResult::live);
        Ok(())
    }

    /// Makes the previous version live again (it was dry-run when it first went live). Returns the
    /// source now live, or `None` when there is no previous version.
    pub fn rollback(&self) -> Option<Source> {
        let previous = self.previous()?;
        self.replace(previous.clone());
        self.metrics.reloaded(W::NAME, ReloadResult::rolled_back);
        Some(previous.source.clone())
    }

    /// Makes `module` live without a dry run: for tests of modules that fail only on some inputs.
    #[cfg(test)]
    pub(crate) fn force(&self, module: Module<W>, source: Source) {
        self.replace(Live::new(module, source));
    }

    /// Makes no decision until [`Self::release`]: `source`, an operator's module, is not live, for
    /// `why`, and whatever decides now (the bundled default, a file) was not meant to decide instead.
    pub fn withhold(&self, source: Source, why: String) {
        let mut withheld = self.withheld.lock().unwrap_or_else(PoisonError::into_inner);
        if withheld.as_ref().is_none_or(|(held_by, held_why)| *held_by != source || *held_why != why) {
            tracing::warn!(decision = W::NAME, policy = %source, %why, "decisions withheld until the module is live");
        }
        *withheld = Some((source, why));
    }

    /// Decides again, if `source` was what withheld decisions.
    pub fn release(&self, source: &Source) {
        let mut withheld = self.withheld.lock().unwrap_or_else(PoisonError::into_inner);
        if withheld.as_ref().is_some_and(|(held_by, _)| held_by == source) {
            tracing::info!(decision = W::NAME, policy = %source, "decisions no longer withheld");
            *withheld = None;
        }
    }

    /// Goes back to the bundled default (the live module's source went away).
    pub fn reset(&self) {
        if !Arc::ptr_eq(&self.live.load(), &self.bundled) {
            self.replace(self.bundled.clone());
        }
    }

    fn replace(&self, next: Arc<Live<W>>) {
        let mut previous = self.previous.lock().unwrap_or_else(PoisonError::into_inner);
        let old = self.live.swap(next.clone());
        self.revision.fetch_add(1, Ordering::AcqRel);
        tracing::info!(
            decision = W::NAME,
            policy = %next.source,
            digest = next.module.digest(),
            replaced = %old.source,
            replaced_digest = old.module.digest(),
            "policy live"
        );
        *previous = Some(old);
    }
}

/// The one structured line per decision.
fn log_decision<W: World>(
    live: &Live<W>,
    input: &W::Input,
    result: &Result<W::Output, PolicyError>,
    outcome: Outcome,
    elapsed: Duration,
) {
    let output = match result {
        Ok(output) => W::summarize_output(output),
        Err(error) => error.to_string(),
    };
    // A decision is taken on every pass (the drain policy's on every Node status update): at INFO
    // that was hundreds of lines a second on a large cluster, none of them a change.
    tracing::debug!(
        target: "sunk::decision",
        decision = W::NAME,
        policy = %live.source,
        digest = &live.labels.digest,
        input = W::summarize_input(input),
        output,
        outcome = ?outcome,
        duration_us = elapsed.as_micros() as u64,
    );
}

/// A decision point whatever its world: what delivering modules needs (bytes in, status out).
pub trait AnyDecisionPoint: Send + Sync {
    /// The world's name.
    fn decision(&self) -> &'static str;
    /// Compiles `bytes`, checks them, dry-runs them and makes them live. Blocks for tens of ms.
    fn offer(&self, bytes: &[u8], config: Option<String>, source: Source) -> Result<()>;
    /// Where the live module came from, and its digest.
    fn live_version(&self) -> (Source, String);
    /// Where the previous module came from, and its digest.
    fn previous_version(&self) -> Option<(Source, String)>;
    /// See [`DecisionPoint::rollback`].
    fn rollback(&self) -> Option<Source>;
    /// See [`DecisionPoint::reset`].
    fn reset(&self);
    /// See [`DecisionPoint::withhold`].
    fn withhold(&self, source: Source, why: String);
    /// See [`DecisionPoint::release`].
    fn release(&self, source: &Source);
}

impl<W: World> AnyDecisionPoint for DecisionPoint<W> {
    fn decision(&self) -> &'static str {
        W::NAME
    }

    fn offer(&self, bytes: &[u8], config: Option<String>, source: Source) -> Result<()> {
        let module = Module::<W>::load(bytes, config).inspect_err(|_| {
            self.metrics.reloaded(W::NAME, ReloadResult::refused);
        })?;
        self.swap(module, source)
    }

    fn live_version(&self) -> (Source, String) {
        let live = self.live();
        (live.source.clone(), live.module.digest().to_owned())
    }

    fn previous_version(&self) -> Option<(Source, String)> {
        self.previous().map(|previous| (previous.source.clone(), previous.module.digest().to_owned()))
    }

    fn rollback(&self) -> Option<Source> {
        DecisionPoint::rollback(self)
    }

    fn reset(&self) {
        DecisionPoint::reset(self)
    }

    fn withhold(&self, source: Source, why: String) {
        DecisionPoint::withhold(self, source, why)
    }

    fn release(&self, source: &Source) {
        DecisionPoint::release(self, source)
    }
}
