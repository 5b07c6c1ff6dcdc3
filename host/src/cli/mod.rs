//! The `sunk` command line.

mod crds;
mod first_contact;
mod host;
mod host_args;
mod logging;
mod policy;
mod writers;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use crds::{apply as apply_crds, crds, custom_resources};

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
    /// Prints the CustomResourceDefinitions sunk serves (YAML), or applies them (`--apply`).
    Crds(crds::CrdsArgs),
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    logging::init(cli.log_format);
    crate::tls::install_crypto_provider();
    let result = match cli.command {
        Command::Host(args) => host::run(*args),
        Command::Policy(command) => policy::run(command),
        Command::Crds(args) => crds::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("sunk: {error:#}");
            ExitCode::FAILURE
        }
    }
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
}
