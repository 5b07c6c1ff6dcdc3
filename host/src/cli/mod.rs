//! The `sunk` command line.

mod first_contact;
mod host;
mod host_args;
mod logging;
mod policy;
mod writers;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

#[derive(Parser)]
#[command(name = "sunk", version, about = "Runs Slurm and Kubernetes on one pool of compute")]
struct Cli {
    /// How log lines are written to stderr: `text`, or `json` (one object per line). `RUST_LOG`
    /// chooses which lines.
    #[arg(long, global = true, env = "SUNK_LOG_FORMAT", value_enum, ignore_case = true,
          default_value_t = logging::LogFormat::Text)]
    log_format: logging::LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the host controller: the pod scheduler and the NodeSet controller (and, later, the syncer).
    Host(Box<host_args::HostArgs>),
    /// Builds, checks, tests, benchmarks and pushes policy modules.
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
    /// Prints the CustomResourceDefinitions sunk serves (YAML), for `kubectl apply -f -`.
    Crds(CrdsArgs),
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    logging::init(cli.log_format);
    crate::tls::install_crypto_provider();
    let result = match cli.command {
        Command::Host(args) => host::run(*args),
        Command::Policy(command) => policy::run(command),
        Command::Crds(args) => write_crds(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("sunk: {error:#}");
            ExitCode::FAILURE
        }
    }
}

#[derive(clap::Args)]
struct CrdsArgs {
    /// Write one `<plural>.yaml` per CRD into this directory (the chart's `crds/`) instead.
    #[arg(long)]
    dir: Option<std::path::PathBuf>,
}

fn write_crds(args: CrdsArgs) -> anyhow::Result<()> {
    let crds = crds()?;
    let Some(dir) = args.dir else {
        let documents: Vec<&str> = crds.iter().map(|(_, yaml)| yaml.as_str()).collect();
        print!("{}", documents.join("---\n"));
        return Ok(());
    };
    for (plural, yaml) in crds {
        let path = dir.join(format!("{plural}.yaml"));
        std::fs::write(&path, yaml).map_err(|error| anyhow::anyhow!("writing {}: {error}", path.display()))?;
    }
    Ok(())
}

/// Every CRD sunk serves.
pub fn custom_resources() -> [CustomResourceDefinition; 2] {
    use kube::CustomResourceExt;
    [crate::delivery::PolicyModule::crd(), crate::nodeset::NodeSet::crd()]
}

/// Every CRD sunk serves: its plural name and its YAML.
pub fn crds() -> anyhow::Result<Vec<(String, String)>> {
    custom_resources().iter().map(|crd| Ok((crd.spec.names.plural.clone(), serde_saphyr::to_string(crd)?))).collect()
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{Cli, logging::LogFormat};

    #[test]
    fn the_log_format_is_text_unless_asked_for_json_before_or_after_the_subcommand() {
        let parse = |args: &[&str]| {
            let host = ["sunk"].iter().chain(args).chain(&["--slurm-jwt-key", "/k"]).copied();
            Cli::try_parse_from(host).map(|cli| cli.log_format)
        };
        assert_eq!(parse(&["host"]).unwrap(), LogFormat::Text);
        assert_eq!(parse(&["host", "--log-format", "json"]).unwrap(), LogFormat::Json);
        assert_eq!(parse(&["--log-format=JSON", "host"]).unwrap(), LogFormat::Json);
        assert_eq!(parse(&["host", "--log-format=text"]).unwrap(), LogFormat::Text);
        assert!(parse(&["host", "--log-format=yaml"]).is_err());
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
