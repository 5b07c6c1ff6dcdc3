use std::path::Path;

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::deadline::{DeadlineLayer, REQUEST_DEADLINE};
use crate::leader::{Fence, fence_layer};

/// A client from an explicit kubeconfig file, or else the usual inference
/// (`KUBECONFIG`, `~/.kube/config`, in-cluster service account).
pub async fn connect(kubeconfig: Option<&Path>) -> anyhow::Result<Client> {
    build(config(kubeconfig).await?)
}

/// A client that takes "429 Too Many Requests" for an answer instead of retrying it for minutes: an
/// eviction a PodDisruptionBudget refuses says so with a 429.
pub async fn connect_without_retries(kubeconfig: Option<&Path>) -> anyhow::Result<Client> {
    let mut config = config(kubeconfig).await?;
    config.default_retry = false;
    build(config)
}

/// Every client's requests but watches carry [`REQUEST_DEADLINE`].
fn build(config: Config) -> anyhow::Result<Client> {
    let builder = kube::client::ClientBuilder::try_from(config).context("building the Kubernetes client")?;
    Ok(builder.with_layer(&DeadlineLayer(REQUEST_DEADLINE)).build())
}

/// The writers' client: while `fence` is closed every request but a read is refused, before it
/// leaves. `retries: false` takes a 429 for an answer (see `connect_without_retries`).
pub async fn connect_fenced(kubeconfig: Option<&Path>, fence: Fence, retries: bool) -> anyhow::Result<Client> {
    let mut config = config(kubeconfig).await?;
    config.default_retry = retries;
    let builder = kube::client::ClientBuilder::try_from(config).context("building the Kubernetes client")?;
    Ok(builder.with_layer(&fence_layer(fence)).with_layer(&DeadlineLayer(REQUEST_DEADLINE)).build())
}

async fn config(kubeconfig: Option<&Path>) -> anyhow::Result<Config> {
    Ok(match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path).with_context(|| format!("reading kubeconfig {}", path.display()))?;
            Config::from_custom_kubeconfig(file, &KubeConfigOptions::default()).await?
        }
        None => Config::infer().await.context("no kubeconfig given and none could be inferred")?,
    })
}
