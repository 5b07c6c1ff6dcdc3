use std::path::Path;

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// A client from an explicit kubeconfig file, or else the usual inference
/// (`KUBECONFIG`, `~/.kube/config`, in-cluster service account).
pub async fn connect(kubeconfig: Option<&Path>) -> anyhow::Result<Client> {
    let config = match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path).with_context(|| format!("reading kubeconfig {}", path.display()))?;
            Config::from_custom_kubeconfig(file, &KubeConfigOptions::default()).await?
        }
        None => Config::infer().await.context("no kubeconfig given and none could be inferred")?,
    };
    Client::try_from(config).context("building the Kubernetes client")
}
