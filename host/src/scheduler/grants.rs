//! Which grant a pod's namespace gets: the operator's tenancy document and, when a grant selects
//! namespaces by label, the namespaces' labels as the API server has them (never the pod's).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};

use super::held::UidGrant;
use crate::tenancy::{Grant, Tenancy};

/// Namespaces' metadata, watched only when some grant selects by label.
pub type NamespaceLabels = Store<PartialObjectMeta<Namespace>>;

#[derive(Clone)]
pub struct Grants {
    tenancy: Arc<Tenancy>,
    namespaces: Option<NamespaceLabels>,
}

impl Grants {
    pub fn new(tenancy: Arc<Tenancy>, namespaces: Option<NamespaceLabels>) -> Self {
        Self { tenancy, namespaces }
    }

    /// Whether every annotation is honoured as it is (`tenancy.trustAnnotations`).
    pub fn trust_annotations(&self) -> bool {
        self.tenancy.trust_annotations
    }

    /// The grant of `namespace`; `None` while its labels, which choose it, are not known (the watch
    /// of namespaces has not listed it yet).
    pub fn of(&self, namespace: &str) -> Option<&Grant> {
        let listed = self.listed(namespace);
        self.tenancy.grant_for(namespace, listed.as_ref().map(|meta| meta.labels()))
    }

    /// The grant that gives `namespace`'s pods `uid`, and how; none when grants are not applied
    /// (`trustAnnotations`), the namespace's grant is not known yet, or it gives no such uid.
    pub fn giving(&self, namespace: &str, uid: u32) -> Option<UidGrant> {
        if self.trust_annotations() {
            return None;
        }
        let listed = self.listed(namespace);
        let (grant, granted) = self.tenancy.named_grant_for(namespace, listed.as_ref().map(|meta| meta.labels()))?;
        Some(UidGrant { namespace: namespace.to_owned(), grant, given: granted.gives_uid(uid)? })
    }

    /// Whether namespaces' labels are known (see [`Self::namespace_labels`]).
    pub fn knows_namespace_labels(&self) -> bool {
        self.namespaces.is_some()
    }

    /// A namespace's labels, for a namespaceSelector; none unless a grant selects namespaces by label
    /// (only then does the host watch them) and the namespace is listed.
    pub fn namespace_labels(&self, namespace: &str) -> Option<std::collections::BTreeMap<String, String>> {
        self.listed(namespace).map(|meta| meta.labels().clone())
    }

    /// The namespace as the watch of namespaces has it, when some grant selects by label.
    fn listed(&self, namespace: &str) -> Option<Arc<PartialObjectMeta<Namespace>>> {
        self.namespaces.as_ref().and_then(|store| store.get(&ObjectRef::new(namespace)))
    }
}

#[cfg(test)]
mod tests {
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;

    use super::*;

    #[test]
    fn a_grant_by_label_is_known_once_the_namespace_is_listed() {
        let tenancy = Tenancy::parse(
            r#"{"grants": [{"namespaceSelector": {"matchLabels": {"team": "ml"}}, "user": 1000}]}"#,
            "t.json",
        )
        .expect("parses");
        let (store, mut writer) = reflector::store::<PartialObjectMeta<Namespace>>();
        let grants = Grants::new(Arc::new(tenancy), Some(store));
        assert!(grants.of("ml").is_none(), "not listed yet");

        let namespace: PartialObjectMeta<Namespace> = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "PartialObjectMetadata",
            "metadata": {"name": "ml", "labels": {"team": "ml"}}
        }))
        .expect("metadata");
        writer.apply_watcher_event(&Event::Apply(namespace));
        assert_eq!(grants.of("ml").map(|grant| grant.user), Some(1000));
        let given = grants.giving("ml", 1000).map(|uid| (uid.grant.to_string(), uid.given));
        assert_eq!(given, Some(("grants[0]".into(), crate::tenancy::GivenUid::User)));
        assert_eq!(grants.giving("ml", 1001), None, "not a uid the grant gives");
    }
}
