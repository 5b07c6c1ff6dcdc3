//! `sunk policy test <module> <cases.yaml>`: a module's answers against expected ones.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use super::ModuleArgs;

#[derive(Args)]
pub struct TestArgs {
    #[command(flatten)]
    module: ModuleArgs,
    /// The YAML file of cases.
    cases: PathBuf,
}

pub fn run(args: TestArgs) -> Result<()> {
    let _ = (args.module, args.cases);
    anyhow::bail!("not written yet")
}
