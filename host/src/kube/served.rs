//! Waiting for a custom resource to be served, saying once, loudly, what is missing.

use std::fmt::Debug;
use std::time::Duration;

use kube::Resource;
use kube::api::{Api, ListParams};
use serde::de::DeserializeOwned;

/// Waits until the API server lists `api`'s resource. Without its CRD a controller would only fail
/// quietly: `missing` says what to install, logged once.
pub async fn wait_until_served<K>(api: &Api<K>, missing: &str)
where
    K: Resource + Clone + DeserializeOwned + Debug,
    K::DynamicType: Default,
{
    const CHECK_EVERY: Duration = Duration::from_secs(15);
    let kind = K::kind(&K::DynamicType::default()).to_string();
    let mut warned = false;
    loop {
        match api.list(&ListParams::default().limit(1)).await {
            Ok(_) => {
                if warned {
                    tracing::info!("{kind}s are served now; watching them");
                }
                return;
            }
            Err(error) if !warned => {
                let absent = super::is_gone(&error);
                let hint = if absent { missing.to_owned() } else { format!("{kind}s cannot be listed") };
                tracing::warn!(%error, "{hint}; waiting for it");
                warned = true;
            }
            Err(_) => {}
        }
        tokio::time::sleep(CHECK_EVERY).await;
    }
}
