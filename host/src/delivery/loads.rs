//! What loading each PolicyModule came to, kept by the loader (on every replica) for the reporter
//! (on the leader), and whether the PolicyModules that existed at start have all been loaded.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{broadcast, watch};

use crate::policy::Source;

/// What loading one PolicyModule came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Live. `news` is the Event to publish when the status says so first (`Live`, `RolledBack`);
    /// `replaced` is the module it took over from.
    Live { message: String, news: Option<&'static str>, replaced: Option<Source> },
    /// Not live, for `message` (which says what decides instead, or that nothing does).
    Refused { message: String },
    /// Another PolicyModule went live after this one.
    Superseded,
}

#[derive(Default)]
struct State {
    outcomes: HashMap<String, Outcome>,
    /// The modules that existed at start and are not loaded yet; `None` before they were listed.
    pending: Option<BTreeSet<String>>,
    /// Pins whose bytes were refused when compiled or dry-run, by module: the same bytes are not
    /// compiled again on every retry.
    refused_pins: HashMap<String, (String, String)>,
}

/// Shared between the loader and the reporters of each term; cheap to clone.
#[derive(Clone)]
pub struct Loads {
    state: Arc<Mutex<State>>,
    changed: broadcast::Sender<String>,
    loaded: Arc<watch::Sender<bool>>,
}

impl Default for Loads {
    fn default() -> Self {
        Self { state: Arc::default(), changed: broadcast::channel(256).0, loaded: Arc::new(watch::channel(false).0) }
    }
}

impl Loads {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The PolicyModules that exist at start (none when they are not served at all).
    pub fn expect(&self, names: impl IntoIterator<Item = String>) {
        let mut state = self.lock();
        let pending: BTreeSet<String> = names.into_iter().filter(|name| !state.outcomes.contains_key(name)).collect();
        if pending.is_empty() {
            self.loaded.send_replace(true);
        }
        state.pending = Some(pending);
    }

    /// Records what loading `name` came to, and tells the reporter if it is news.
    pub fn record(&self, name: &str, outcome: Outcome) {
        let mut state = self.lock();
        let news = state.outcomes.insert(name.to_owned(), outcome.clone()) != Some(outcome);
        Self::done_with(&mut state, name, &self.loaded);
        drop(state);
        if news {
            let _ = self.changed.send(name.to_owned());
        }
    }

    /// The PolicyModule `name` is gone.
    pub fn forget(&self, name: &str) {
        let mut state = self.lock();
        state.outcomes.remove(name);
        state.refused_pins.remove(name);
        Self::done_with(&mut state, name, &self.loaded);
    }

    fn done_with(state: &mut State, name: &str, loaded: &watch::Sender<bool>) {
        if let Some(pending) = &mut state.pending
            && pending.remove(name)
            && pending.is_empty()
        {
            loaded.send_replace(true);
        }
    }

    pub fn outcome(&self, name: &str) -> Option<Outcome> {
        self.lock().outcomes.get(name).cloned()
    }

    /// The refusal of `name`'s bytes pinned by `pin`, if they were refused before.
    pub fn refused_pin(&self, name: &str, pin: &str) -> Option<String> {
        let state = self.lock();
        state.refused_pins.get(name).filter(|(refused, _)| refused == pin).map(|(_, why)| why.clone())
    }

    pub fn refuse_pin(&self, name: &str, pin: &str, why: &str) {
        self.lock().refused_pins.insert(name.to_owned(), (pin.to_owned(), why.to_owned()));
    }

    /// The names of PolicyModules whose outcome changed, from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<String> {
        self.changed.subscribe()
    }

    /// Returns once every PolicyModule that existed at start is loaded (live, or refused and
    /// withholding its decision point), so that no decision is made by a default meant to be replaced.
    pub async fn initial_load(&self) {
        let mut loaded = self.loaded.subscribe();
        let _ = loaded.wait_for(|loaded| *loaded).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live() -> Outcome {
        Outcome::Live { message: "live".into(), news: Some("Live"), replaced: None }
    }

    #[tokio::test]
    async fn the_initial_load_ends_once_every_module_there_at_start_is_loaded_or_gone() {
        let loads = Loads::default();
        let mut news = loads.subscribe();
        loads.expect(["a".to_string(), "b".to_string()]);
        assert!(!*loads.loaded.borrow());
        loads.record("a", live());
        assert_eq!(news.try_recv().ok().as_deref(), Some("a"));
        loads.record("a", live());
        assert!(news.try_recv().is_err(), "the same outcome is no news");
        assert!(!*loads.loaded.borrow(), "b is still loading");
        loads.forget("b");
        loads.initial_load().await;
    }

    #[tokio::test]
    async fn nothing_to_load_is_loaded_at_once() {
        let loads = Loads::default();
        loads.expect([]);
        loads.initial_load().await;
        loads.refuse_pin("a", "ab12", "bad world");
        assert_eq!(loads.refused_pin("a", "ab12").as_deref(), Some("bad world"));
        assert_eq!(loads.refused_pin("a", "cd34"), None, "other bytes are compiled afresh");
    }
}
