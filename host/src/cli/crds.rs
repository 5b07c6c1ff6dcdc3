//! `sunk crds`: the CustomResourceDefinitions this build serves, printed, written into the chart's
//! `crds/`, or applied to a cluster. Helm installs a chart's `crds/` with the first release and never
//! changes them afterwards, so the chart's pre-upgrade hook runs `sunk crds --apply` with the new
//! version's image: the new host starts against the CRDs it was built with.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, Result};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};

/// The field manager of `--apply`: the hook owns every field of the CRDs it writes.
const FIELD_MANAGER: &str = "sunk-crds";
/// How long `--apply` waits for the API server to serve an applied CRD.
const ESTABLISHED_WITHIN: Duration = Duration::from_secs(60);

#[derive(clap::Args)]
pub struct CrdsArgs {
    /// Write one `<plural>.yaml` per CRD into this directory (the chart's `crds/`) instead.
    #[arg(long, conflicts_with = "apply")]
    dir: Option<PathBuf>,
    /// Apply them to the cluster (server-side, taking over every field), and wait until each is
    /// served.
    #[arg(long)]
    apply: bool,
    /// kubeconfig for `--apply`; without it, KUBECONFIG, ~/.kube/config or the in-cluster service
    /// account.
    #[arg(long, env = "SUNK_KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
}

pub fn run(args: CrdsArgs) -> Result<()> {
    if args.apply {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        return runtime.block_on(apply_from(args.kubeconfig));
    }
    let crds = crds()?;
    let Some(dir) = args.dir else {
        let documents: Vec<&str> = crds.iter().map(|(_, yaml)| yaml.as_str()).collect();
        print!("{}", documents.join("---\n"));
        return Ok(());
    };
    for (plural, yaml) in crds {
        let path = dir.join(format!("{plural}.yaml"));
        std::fs::write(&path, yaml).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Every CRD sunk serves.
pub fn custom_resources() -> [CustomResourceDefinition; 2] {
    use kube::CustomResourceExt;
    [crate::delivery::PolicyModule::crd(), crate::nodeset::NodeSet::crd()]
}

/// Every CRD sunk serves: its plural name and its YAML.
pub fn crds() -> Result<Vec<(String, String)>> {
    custom_resources().iter().map(|crd| Ok((crd.spec.names.plural.clone(), serde_saphyr::to_string(crd)?))).collect()
}

async fn apply_from(kubeconfig: Option<PathBuf>) -> Result<()> {
    let client = crate::kube::connect(kubeconfig.as_deref()).await?;
    for name in apply(&client, ESTABLISHED_WITHIN).await? {
        println!("applied CRD {name}");
    }
    Ok(())
}

/// Applies every CRD sunk serves (server-side, taking over every field) and waits up to `within` for
/// each to be established; returns their names.
pub async fn apply(client: &Client, within: Duration) -> Result<Vec<String>> {
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut applied = Vec::new();
    for crd in custom_resources() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &params, &Patch::Apply(&crd)).await.with_context(|| format!("applying CRD {name}"))?;
        let established = await_condition(api.clone(), &name, conditions::is_crd_established());
        tokio::time::timeout(within, established)
            .await
            .with_context(|| format!("CRD {name} not established within {within:?}"))?
            .with_context(|| format!("watching CRD {name}"))?;
        applied.push(name);
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    #[test]
    fn apply_excludes_writing_files() {
        let parse = |args: &[&str]| super::super::Cli::try_parse_from(["sunk", "crds"].iter().chain(args));
        assert!(parse(&[]).is_ok());
        assert!(parse(&["--apply", "--kubeconfig", "/k"]).is_ok());
        assert!(parse(&["--dir", "crds", "--apply"]).is_err(), "--apply writes no files");
    }

    /// The chart installs the CRDs from files; they must be what this build serves.
    #[test]
    fn the_charts_crds_are_current() {
        for (plural, generated) in super::crds().unwrap() {
            let path = format!("{}/../charts/sunk/crds/{plural}.yaml", env!("CARGO_MANIFEST_DIR"));
            let committed = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                committed == generated,
                "{path} is stale: regenerate it with `cargo run -p sunk -- crds --dir charts/sunk/crds`"
            );
        }
    }
}
