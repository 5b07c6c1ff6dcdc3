//! Reads a module's bytes from the ConfigMap or Secret a PolicyModule names.

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{Api, Client};

use super::resource::{KeyRef, ModuleSource};

/// Why the bytes could not be had; the message names the object and key.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("spec.source must name exactly one of configMap and secret")]
    Ambiguous,
    #[error("{kind} {name} does not exist in namespace {namespace}")]
    Missing { kind: &'static str, name: String, namespace: String },
    #[error("{kind} {name} has no key {key:?} in {field}")]
    NoKey { kind: &'static str, name: String, key: String, field: &'static str },
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

/// The bytes `source` points at, in `namespace`.
pub async fn module_bytes(client: &Client, namespace: &str, source: &ModuleSource) -> Result<Vec<u8>, FetchError> {
    match (&source.config_map, &source.secret) {
        (Some(key), None) => {
            let map = get::<ConfigMap>(client, namespace, key, "ConfigMap").await?;
            let bytes = map.binary_data.and_then(|mut data| data.remove(&key.key));
            bytes.map(|b| b.0).ok_or_else(|| no_key("ConfigMap", key, "binaryData"))
        }
        (None, Some(key)) => {
            let secret = get::<Secret>(client, namespace, key, "Secret").await?;
            let bytes = secret.data.and_then(|mut data| data.remove(&key.key));
            bytes.map(|b| b.0).ok_or_else(|| no_key("Secret", key, "data"))
        }
        _ => Err(FetchError::Ambiguous),
    }
}

async fn get<K>(client: &Client, namespace: &str, key: &KeyRef, kind: &'static str) -> Result<K, FetchError>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::namespaced(client.clone(), namespace).get_opt(&key.name).await?.ok_or_else(|| FetchError::Missing {
        kind,
        name: key.name.clone(),
        namespace: namespace.to_owned(),
    })
}

fn no_key(kind: &'static str, key: &KeyRef, field: &'static str) -> FetchError {
    FetchError::NoKey { kind, name: key.name.clone(), key: key.key.clone(), field }
}
