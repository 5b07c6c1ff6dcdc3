//! The `sunk` command line.

mod host;
mod policy;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "sunk", version, about = "Runs Slurm and Kubernetes on one pool of compute")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the host controller: the pod scheduler (and, later, the NodeSet controller and syncer).
    Host(host::HostArgs),
    /// Builds, checks, tests, benchmarks and pushes policy modules.
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
    /// Prints the CustomResourceDefinitions sunk serves (YAML), for `kubectl apply -f -`.
    Crds,
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    crate::tls::install_crypto_provider();
    let result = match cli.command {
        Command::Host(args) => host::run(args),
        Command::Policy(command) => policy::run(command),
        Command::Crds => print_crds(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("sunk: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn print_crds() -> anyhow::Result<()> {
    use kube::CustomResourceExt;
    print!("{}", serde_saphyr::to_string(&crate::delivery::PolicyModule::crd())?);
    Ok(())
}

fn init_tracing() {
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,kube_runtime=warn".into());
    let json = std::env::var("SUNK_LOG_FORMAT").is_ok_and(|format| format == "json");
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}
