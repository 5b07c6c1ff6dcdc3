//! Which namespaces the scheduler serves (`--watch-namespaces`), as SUNK's `scheduler.scope` does.
//! Pods elsewhere are neither scheduled nor touched, and their placeholders are never taken for
//! orphans.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::Event;
use kube::{Api, Client, ResourceExt};

/// All namespaces, or a set of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope(Option<BTreeSet<String>>);

impl Scope {
    /// From the flag's list: empty means every namespace.
    pub fn new(namespaces: &[String]) -> Self {
        let set: BTreeSet<String> =
            namespaces.iter().map(|ns| ns.trim().to_owned()).filter(|ns| !ns.is_empty()).collect();
        Self((!set.is_empty()).then_some(set))
    }

    pub fn contains(&self, namespace: &str) -> bool {
        self.0.as_ref().is_none_or(|set| set.contains(namespace))
    }

    /// The API to watch: one namespace's when the scope is exactly one (so the host needs no
    /// cluster-wide pod access), otherwise every namespace's (filtered by [`Scope::admits`]).
    pub fn pods(&self, client: Client) -> Api<Pod> {
        match self.0.as_ref().map(|set| set.iter().collect::<Vec<_>>()).as_deref() {
            Some([one]) => Api::namespaced(client, one),
            _ => Api::all(client),
        }
    }

    /// Whether a watch event is for this scope (the list markers always are).
    pub fn admits(&self, event: &Event<Pod>) -> bool {
        match event {
            Event::Apply(pod) | Event::Delete(pod) | Event::InitApply(pod) => {
                self.contains(&pod.namespace().unwrap_or_default())
            }
            Event::Init | Event::InitDone => true,
        }
    }

    pub fn describe(&self) -> String {
        match &self.0 {
            None => "all namespaces".into(),
            Some(set) => set.iter().cloned().collect::<Vec<_>>().join(","),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(namespace: &str) -> Pod {
        serde_json::from_value(serde_json::json!({"metadata": {"name": "p", "namespace": namespace}})).unwrap()
    }

    #[test]
    fn an_empty_list_is_every_namespace() {
        let all = Scope::new(&[]);
        assert!(all.contains("anything"));
        assert!(all.admits(&Event::Apply(pod("x"))));
        assert_eq!(Scope::new(&[" ".into()]), all);
    }

    #[test]
    fn a_list_admits_only_its_namespaces() {
        let scope = Scope::new(&["ml".into(), "batch".into()]);
        assert!(scope.contains("ml") && scope.contains("batch") && !scope.contains("web"));
        assert!(scope.admits(&Event::InitApply(pod("ml"))));
        assert!(!scope.admits(&Event::Delete(pod("web"))));
        assert!(scope.admits(&Event::InitDone));
        assert_eq!(scope.describe(), "batch,ml");
    }
}
