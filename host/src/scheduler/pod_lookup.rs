//! A placeholder's pod, found in this scheduler's pod store by the key its link carries.

use std::sync::Arc;

use crate::scheduler::watched_pod::WatchedPod;
use kube::runtime::reflector::{ObjectRef, Store};

use super::link::PodKey;

/// The pod `key` names, if the store has it and it is that very pod: one deleted and created again
/// under its name is another pod, with nothing to do with the job.
pub fn find(pods: &Store<WatchedPod>, key: &PodKey) -> Option<Arc<WatchedPod>> {
    let pod = pods.get(&ObjectRef::new(&key.name).within(&key.namespace))?;
    (pod.metadata.uid.as_deref() == Some(key.uid.as_str())).then_some(pod)
}

#[cfg(test)]
mod tests {
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;

    use super::*;

    #[test]
    fn a_pod_created_again_under_the_name_is_not_found() {
        let (pods, mut writer) = reflector::store::<WatchedPod>();
        let pod = serde_json::json!({"metadata": {"name": "a", "namespace": "ml", "uid": "second"}});
        writer.apply_watcher_event(&Event::Apply(serde_json::from_value(pod).unwrap()));
        let key = |uid: &str| PodKey { namespace: "ml".into(), name: "a".into(), uid: uid.into() };
        assert!(find(&pods, &key("second")).is_some());
        assert!(find(&pods, &key("first")).is_none());
    }
}
