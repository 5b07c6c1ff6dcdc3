//! One watch over several namespaces, for a reflector that must see them as one.
//!
//! Kubernetes has no watch of a set of namespaces, and a host whose RBAC is a RoleBinding in each
//! may not watch them all. So each namespace gets its own watcher, and [`Join`] turns their events
//! into the events of one watch: a reflector store takes a list (`Init` .. `InitDone`) as the whole
//! world, so one namespace's relist would otherwise drop every other namespace's objects. The first
//! lists are joined into one list, whose end (and so the store's readiness, which the orphan sweep
//! waits for) comes only when every namespace has listed; a later relist of one namespace becomes the
//! applies and deletes it amounts to.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;

use futures::StreamExt;
use futures::stream::{self, BoxStream};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

/// The events of `K` in `namespaces`, as one watch of them would give (each namespace's watcher
/// backs off on its own errors, which pass through).
pub fn watch_namespaces<K>(
    client: Client,
    namespaces: &BTreeSet<String>,
    config: watcher::Config,
) -> BoxStream<'static, watcher::Result<Event<K>>>
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + Default
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
{
    let watches = namespaces.iter().map(|namespace| {
        let name = namespace.clone();
        watcher::watcher(Api::<K>::namespaced(client.clone(), namespace), config.clone())
            .default_backoff()
            .map(move |event| (name.clone(), event))
            .boxed()
    });
    let mut join = Join::new(namespaces.iter().cloned());
    stream::select_all(watches)
        .flat_map(move |(namespace, event)| {
            let events: Vec<watcher::Result<Event<K>>> = match event {
                Ok(event) => join.step(&namespace, event).into_iter().map(Ok).collect(),
                Err(error) => vec![Err(error)],
            };
            stream::iter(events)
        })
        .boxed()
}

/// Several namespaces' watch events joined into one watch's (pure: no I/O).
pub(crate) struct Join<K> {
    namespaces: BTreeMap<String, Watched<K>>,
    joined: bool,
}

struct Watched<K> {
    /// A list in progress: the objects since its `Init`.
    listing: Option<BTreeMap<String, K>>,
    /// Until the join: the namespace's objects, once it has listed.
    listed: Option<BTreeMap<String, K>>,
    /// After the join: the names the consumer holds. Only names, since the store holds the objects.
    names: BTreeSet<String>,
}

impl<K> Default for Watched<K> {
    fn default() -> Self {
        Self { listing: None, listed: None, names: BTreeSet::new() }
    }
}

impl<K: Resource + Clone + Default> Join<K> {
    pub(crate) fn new(namespaces: impl IntoIterator<Item = String>) -> Self {
        let namespaces = namespaces.into_iter().map(|namespace| (namespace, Watched::default())).collect();
        Self { namespaces, joined: false }
    }

    /// What one namespace's event means for the joined watch.
    pub(crate) fn step(&mut self, namespace: &str, event: Event<K>) -> Vec<Event<K>> {
        let joined = self.joined;
        let Some(watched) = self.namespaces.get_mut(namespace) else {
            return Vec::new();
        };
        match event {
            Event::Init => {
                watched.listing = Some(BTreeMap::new());
                Vec::new()
            }
            Event::InitApply(object) => {
                if let Some(listing) = &mut watched.listing {
                    listing.insert(object.name_any(), object);
                }
                Vec::new()
            }
            Event::InitDone => {
                let list = watched.listing.take().unwrap_or_default();
                if joined {
                    return watched.relisted(namespace, list);
                }
                watched.listed = Some(list);
                self.join_when_all_listed()
            }
            Event::Apply(object) if joined => {
                watched.names.insert(object.name_any());
                vec![Event::Apply(object)]
            }
            Event::Delete(object) if joined => {
                watched.names.remove(&object.name_any());
                vec![Event::Delete(object)]
            }
            Event::Apply(object) => {
                if let Some(listed) = &mut watched.listed {
                    listed.insert(object.name_any(), object);
                }
                Vec::new()
            }
            Event::Delete(object) => {
                if let Some(listed) = &mut watched.listed {
                    listed.remove(&object.name_any());
                }
                Vec::new()
            }
        }
    }

    /// Once every namespace has listed: their lists as one.
    fn join_when_all_listed(&mut self) -> Vec<Event<K>> {
        if !self.namespaces.values().all(|watched| watched.listed.is_some()) {
            return Vec::new();
        }
        self.joined = true;
        let mut events = vec![Event::Init];
        for watched in self.namespaces.values_mut() {
            let listed = watched.listed.take().unwrap_or_default();
            watched.names = listed.keys().cloned().collect();
            events.extend(listed.into_values().map(Event::InitApply));
        }
        events.push(Event::InitDone);
        events
    }
}

impl<K: Resource + Default> Watched<K> {
    /// A relist after the join: every listed object applied, every name it lacks deleted.
    fn relisted(&mut self, namespace: &str, list: BTreeMap<String, K>) -> Vec<Event<K>> {
        let gone: Vec<String> = self.names.iter().filter(|name| !list.contains_key(*name)).cloned().collect();
        self.names = list.keys().cloned().collect();
        let deletes = gone.into_iter().map(|name| Event::Delete(named::<K>(namespace, name)));
        deletes.chain(list.into_values().map(Event::Apply)).collect()
    }
}

/// An object with only its name and namespace: enough for a store to remove it by.
fn named<K: Resource + Default>(namespace: &str, name: String) -> K {
    let mut object = K::default();
    object.meta_mut().name = Some(name);
    object.meta_mut().namespace = Some(namespace.to_owned());
    object
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;

    use super::*;

    fn pod(namespace: &str, name: &str) -> Pod {
        named(namespace, name.to_owned())
    }

    /// Each event as `kind namespace/name`, to compare with a table.
    fn described(events: &[Event<Pod>]) -> Vec<String> {
        let key = |pod: &Pod| format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
        events
            .iter()
            .map(|event| match event {
                Event::Init => "init".to_owned(),
                Event::InitApply(pod) => format!("init-apply {}", key(pod)),
                Event::InitDone => "init-done".to_owned(),
                Event::Apply(pod) => format!("apply {}", key(pod)),
                Event::Delete(pod) => format!("delete {}", key(pod)),
            })
            .collect()
    }

    fn list(namespace: &str, names: &[&str]) -> Vec<Event<Pod>> {
        let mut events = vec![Event::Init];
        events.extend(names.iter().map(|name| Event::InitApply(pod(namespace, name))));
        events.push(Event::InitDone);
        events
    }

    /// Feeds `(namespace, event)`s in order; what the joined watch says after each.
    fn run(steps: Vec<(&str, Event<Pod>)>) -> Vec<String> {
        let mut join = Join::new(["a".to_owned(), "b".to_owned()]);
        steps.into_iter().flat_map(|(namespace, event)| described(&join.step(namespace, event))).collect()
    }

    fn in_ns(namespace: &str, events: Vec<Event<Pod>>) -> Vec<(&str, Event<Pod>)> {
        events.into_iter().map(|event| (namespace, event)).collect()
    }

    #[test]
    fn the_first_lists_become_one_list_that_ends_when_every_namespace_has_listed() {
        let mut steps = in_ns("a", list("a", &["x"]));
        // Changes in `a` before `b` has listed are part of the one list, not events before it.
        steps.push(("a", Event::Apply(pod("a", "y"))));
        steps.push(("a", Event::Delete(pod("a", "x"))));
        steps.extend(in_ns("b", list("b", &["z"])));
        assert_eq!(run(steps), ["init", "init-apply a/y", "init-apply b/z", "init-done"]);
    }

    #[test]
    fn nothing_is_said_until_every_namespace_has_listed() {
        assert!(run(in_ns("a", list("a", &["x", "y"]))).is_empty());
    }

    #[test]
    fn after_the_join_one_namespaces_relist_is_applies_and_deletes_of_that_namespace_only() {
        let mut steps = in_ns("a", list("a", &["x", "y"]));
        steps.extend(in_ns("b", list("b", &["z"])));
        steps.push(("a", Event::Apply(pod("a", "w"))));
        steps.extend(in_ns("a", list("a", &["y", "v"])));
        let said = run(steps);
        let after_join = &said[said.iter().position(|event| event == "init-done").unwrap() + 1..];
        assert_eq!(after_join, ["apply a/w", "delete a/w", "delete a/x", "apply a/v", "apply a/y"]);
    }

    #[test]
    fn events_after_the_join_pass_through_and_other_namespaces_are_ignored() {
        let mut steps = in_ns("a", list("a", &[]));
        steps.extend(in_ns("b", list("b", &[])));
        steps.push(("b", Event::Apply(pod("b", "q"))));
        steps.push(("b", Event::Delete(pod("b", "q"))));
        steps.push(("c", Event::Apply(pod("c", "q"))));
        assert_eq!(run(steps), ["init", "init-done", "apply b/q", "delete b/q"]);
    }
}
