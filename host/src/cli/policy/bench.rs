//! `sunk policy bench <module>`: decision latency percentiles, next to the bundled default's.

use anyhow::Result;
use clap::Args;

use super::ModuleArgs;

#[derive(Args)]
pub struct BenchArgs {
    #[command(flatten)]
    module: ModuleArgs,
    /// Decisions timed per input.
    #[arg(long, default_value_t = 2000)]
    iterations: usize,
}

pub fn run(args: BenchArgs) -> Result<()> {
    let _ = (args.module, args.iterations);
    anyhow::bail!("not written yet")
}
