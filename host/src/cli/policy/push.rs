//! `sunk policy push` and `sunk policy rollback`: deliver a module through the cluster.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use clap::Args;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use serde_json::json;

use super::{ModuleArgs, dry_run, with_world};
use crate::delivery::{KeyRef, ModuleSource, PolicyModule, PolicyModuleSpec};
use crate::policy::sha256_hex;

const FIELD_MANAGER: &str = "sunk-policy-push";
const MODULE_KEY: &str = "module.wasm";

#[derive(Args)]
pub struct ClusterArgs {
    /// kubeconfig to use; without it, KUBECONFIG, ~/.kube/config or the in-cluster service account.
    #[arg(long, env = "SUNK_KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// The namespace the host loads PolicyModules from.
    #[arg(long, short, default_value = "default")]
    namespace: String,
    /// How long to wait for the host to make the module live (0: do not wait).
    #[arg(long, default_value_t = 60)]
    wait_seconds: u64,
}

#[derive(Args)]
pub struct PushArgs {
    #[command(flatten)]
    module: ModuleArgs,
    /// The PolicyModule's name; the module file's stem by default.
    #[arg(long)]
    name: Option<String>,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Args)]
pub struct RollbackArgs {
    /// The PolicyModule whose previous version goes live again.
    name: String,
    #[command(flatten)]
    cluster: ClusterArgs,
}

pub fn run(args: PushArgs) -> Result<()> {
    let (bytes, compiled) = args.module.compile()?;
    let decision = args.module.decision(&compiled)?;
    let config = args.module.config()?;
    // Refuse here what the host would refuse, with the same message.
    with_world!(decision, dry_run(&compiled, config.clone())).context("the module would be refused")?;
    let name = match args.name {
        Some(name) => name,
        None => args.module.module.file_stem().and_then(|s| s.to_str()).context("the module file has no name")?.into(),
    };
    let digest = sha256_hex(&bytes);
    let configmap = format!("sunk-policy-{name}");
    let spec = PolicyModuleSpec {
        decision,
        sha256: digest.clone(),
        source: ModuleSource {
            config_map: Some(KeyRef { name: configmap.clone(), key: MODULE_KEY.into() }),
            secret: None,
        },
        config,
    };
    runtime()?.block_on(async {
        let client = crate::kube::connect(args.cluster.kubeconfig.as_deref()).await?;
        let namespace = &args.cluster.namespace;
        let labels = BTreeMap::from([(crate::vocabulary::POLICY_MODULE_LABEL.to_owned(), name.clone())]);
        let map = ConfigMap {
            metadata: ObjectMeta { name: Some(configmap.clone()), labels: Some(labels), ..Default::default() },
            binary_data: Some(BTreeMap::from([(MODULE_KEY.to_owned(), ByteString(bytes))])),
            ..Default::default()
        };
        let apply = PatchParams::apply(FIELD_MANAGER).force();
        Api::<ConfigMap>::namespaced(client.clone(), namespace)
            .patch(&configmap, &apply, &Patch::Apply(&map))
            .await
            .with_context(|| format!("writing ConfigMap {namespace}/{configmap}"))?;
        let module = PolicyModule::new(&name, spec);
        let api = Api::<PolicyModule>::namespaced(client.clone(), namespace);
        api.patch(&name, &apply, &Patch::Apply(&module))
            .await
            .with_context(|| format!("writing PolicyModule {namespace}/{name} (is the CRD installed?)"))?;
        println!("pushed {} to PolicyModule {namespace}/{name} ({})", decision.as_str(), &digest);
        wait_live(&api, &name, &digest, &args.cluster).await
    })
}

pub fn rollback(args: RollbackArgs) -> Result<()> {
    runtime()?.block_on(async {
        let client = crate::kube::connect(args.cluster.kubeconfig.as_deref()).await?;
        let api = Api::<PolicyModule>::namespaced(client, &args.cluster.namespace);
        let module = api.get(&args.name).await.with_context(|| format!("reading PolicyModule {}", args.name))?;
        let previous = module.status.and_then(|status| status.previous_digest);
        let Some(previous) = previous else {
            bail!("PolicyModule {} has no previous version (status.previousDigest is empty)", args.name);
        };
        let patch = json!({ "spec": { "sha256": previous } });
        api.patch(&args.name, &PatchParams::default(), &Patch::Merge(patch)).await?;
        println!("PolicyModule {} pinned back to {previous}", args.name);
        wait_live(&api, &args.name, &previous, &args.cluster).await
    })
}

/// Waits until the host reports `digest` live on the PolicyModule, or refuses it.
async fn wait_live(api: &Api<PolicyModule>, name: &str, digest: &str, cluster: &ClusterArgs) -> Result<()> {
    if cluster.wait_seconds == 0 {
        return Ok(());
    }
    let deadline = Instant::now() + Duration::from_secs(cluster.wait_seconds);
    loop {
        let module = api.get(name).await?;
        let status = module.status.clone().unwrap_or_default();
        let current = status.observed_generation.is_some() && status.observed_generation == module.metadata.generation;
        match status.phase.as_deref() {
            Some("Live") if current && status.live_digest.as_deref() == Some(digest) => {
                println!("live: {}", status.message.unwrap_or_default());
                return Ok(());
            }
            Some("Refused") if current => {
                bail!("the host refused {}: {}", module.name_any(), status.message.unwrap_or_default())
            }
            _ => {}
        }
        if Instant::now() > deadline {
            bail!(
                "no host made {name} live within {} s (is `sunk host` running with --policy-namespace {}?)",
                cluster.wait_seconds,
                cluster.namespace
            );
        }
        // A module goes live within a fraction of a second; a coarser poll would be most of the wait.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread().enable_all().build()?)
}
