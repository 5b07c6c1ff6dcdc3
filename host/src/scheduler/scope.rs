//! Which namespaces the scheduler serves (`--watch-namespaces`), as SUNK's `scheduler.scope` does.
//! Pods elsewhere are neither scheduled nor touched, and their placeholders are never taken for
//! orphans.

use std::collections::BTreeSet;
use std::fmt::Debug;

use crate::scheduler::watched_pod::WatchedPod;
use futures::StreamExt;
use futures::stream::BoxStream;
use kube::core::NamespaceResourceScope;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

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

    /// The pods to schedule, as one watch: one namespace's, several namespaces' joined (so the host
    /// needs pod access only in them, as the chart's RoleBindings grant), or every namespace's.
    pub fn watch_pods(
        &self,
        client: Client,
        config: watcher::Config,
    ) -> BoxStream<'static, watcher::Result<Event<WatchedPod>>> {
        self.watch(client, config)
    }

    /// The objects of kind `K` in these namespaces, as one watch (as [`Self::watch_pods`]).
    pub fn watch<K>(&self, client: Client, config: watcher::Config) -> BoxStream<'static, watcher::Result<Event<K>>>
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + Default
            + DeserializeOwned
            + Debug
            + Send
            + Sync
            + 'static,
    {
        let objects = match &self.0 {
            None => Api::all(client),
            Some(set) if set.len() > 1 => return crate::kube::watch_namespaces(client, set, config),
            Some(set) => Api::namespaced(client, set.first().map(String::as_str).unwrap_or_default()),
        };
        watcher::watcher(objects, config).default_backoff().boxed()
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

    #[test]
    fn an_empty_list_is_every_namespace() {
        let all = Scope::new(&[]);
        assert!(all.contains("anything"));
        assert_eq!(Scope::new(&[" ".into()]), all);
    }

    #[test]
    fn a_list_admits_only_its_namespaces() {
        let scope = Scope::new(&["ml".into(), "batch".into()]);
        assert!(scope.contains("ml") && scope.contains("batch") && !scope.contains("web"));
        assert_eq!(scope.describe(), "batch,ml");
    }
}
