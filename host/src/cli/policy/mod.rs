//! `sunk policy`: build, check, test, benchmark and push policy modules.

mod bench;
mod build;
mod cases;
mod check;
mod push;
mod test;

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use clap::{Args, Subcommand};

use crate::delivery::Decision;
use crate::policy::{Compiled, World};

/// Calls the generic `$function` with its world parameter bound to the world of `$decision`.
macro_rules! with_world {
    ($decision:expr, $function:ident ( $($arg:expr),* )) => {
        match $decision {
            $crate::delivery::Decision::JobMapper => $function::<$crate::policy::JobMapperWorld>($($arg),*),
            $crate::delivery::Decision::Preemption => $function::<$crate::policy::PreemptionWorld>($($arg),*),
            $crate::delivery::Decision::Drain => $function::<$crate::policy::DrainWorld>($($arg),*),
        }
    };
}
pub(crate) use with_world;

#[derive(Subcommand)]
pub enum PolicyCommand {
    /// Builds a policy crate for wasm32-unknown-unknown and turns it into a component.
    Build(build::BuildArgs),
    /// Checks a module: its world, its imports and its size; dry-runs it on sample inputs.
    Check(check::CheckArgs),
    /// Runs a module on the cases of a YAML file and compares its answers with the expected ones.
    Test(test::TestArgs),
    /// Measures a module's decision latency (p50/p95/p99), next to the bundled default's.
    Bench(bench::BenchArgs),
    /// Uploads a module to the cluster as a PolicyModule (and its ConfigMap) and waits until it is live.
    Push(push::PushArgs),
    /// Makes a PolicyModule's previous version live again.
    Rollback(push::RollbackArgs),
}

pub fn run(command: PolicyCommand) -> Result<()> {
    match command {
        PolicyCommand::Build(args) => build::run(args),
        PolicyCommand::Check(args) => check::run(args),
        PolicyCommand::Test(args) => test::run(args),
        PolicyCommand::Bench(args) => bench::run(args),
        PolicyCommand::Push(args) => push::run(args),
        PolicyCommand::Rollback(args) => push::rollback(args),
    }
}

/// A module file and, optionally, the decision point it is meant for.
#[derive(Args)]
pub struct ModuleArgs {
    /// The component (`.wasm`).
    module: PathBuf,
    /// The decision point; found from the module's exports when not given.
    #[arg(long)]
    decision: Option<Decision>,
    /// A file whose text the module's `config()` import returns.
    #[arg(long)]
    config_file: Option<PathBuf>,
}

impl ModuleArgs {
    fn bytes(&self) -> Result<Vec<u8>> {
        read(&self.module)
    }

    fn config(&self) -> Result<Option<String>> {
        self.config_file
            .as_deref()
            .map(|path| std::fs::read_to_string(path).with_context(|| format!("--config-file {}", path.display())))
            .transpose()
    }

    /// The module's bytes, compiled once for everything the command does with them.
    fn compile(&self) -> Result<(Vec<u8>, Compiled)> {
        let bytes = self.bytes()?;
        let compiled = Compiled::new(&bytes).with_context(|| format!("loading {}", self.module.display()))?;
        Ok((bytes, compiled))
    }

    /// The decision point: as given, or the one world the module loads as.
    fn decision(&self, compiled: &Compiled) -> Result<Decision> {
        if let Some(decision) = self.decision {
            return Ok(decision);
        }
        let fits: Vec<Decision> = Decision::ALL.into_iter().filter(|d| loads_as(*d, compiled).is_ok()).collect();
        match fits.as_slice() {
            [decision] => Ok(*decision),
            [] => {
                let why = loads_as(Decision::JobMapper, compiled).err().map(|e| format!("{e:#}")).unwrap_or_default();
                bail!("{} is not a module of any sunk decision point ({why})", self.module.display())
            }
            _ => bail!("{} fits several decision points; say which with --decision", self.module.display()),
        }
    }
}

/// Binds `compiled` to `decision`'s world (without configuration), keeping only the verdict.
fn loads_as(decision: Decision, compiled: &Compiled) -> Result<()> {
    fn load<W: World>(compiled: &Compiled) -> Result<()> {
        compiled.module::<W>(None).map(drop)
    }
    with_world!(decision, load(compiled))
}

/// The most fuel one decision used in the dry run, and the budget.
struct FuelUse {
    most: u64,
    budget: u64,
}

/// Dry-runs `compiled` as a module of `W` the way the host does before it goes live.
fn dry_run<W: World>(compiled: &Compiled, config: Option<String>) -> Result<FuelUse> {
    let module = compiled.module::<W>(config)?;
    Ok(FuelUse { most: module.dry_run()?, budget: module.limits().fuel })
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}
