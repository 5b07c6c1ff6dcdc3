//! `sunk policy check <module>`: world, imports, size, and a dry run on the world's sample inputs.

use anyhow::Result;
use clap::Args;

use super::{FuelUse, ModuleArgs, dry_run, with_world};
use crate::policy::sha256_hex;

#[derive(Args)]
pub struct CheckArgs {
    #[command(flatten)]
    module: ModuleArgs,
}

pub fn run(args: CheckArgs) -> Result<()> {
    let (bytes, compiled) = args.module.compile()?;
    println!("module   {}", args.module.module.display());
    println!("size     {} bytes", bytes.len());
    println!("sha256   {}", sha256_hex(&bytes));
    let (imports, exports) = compiled.interface();
    println!("imports  {}", list(&imports));
    println!("exports  {}", list(&exports));
    let decision = args.module.decision(&compiled)?;
    let config = args.module.config()?;
    let FuelUse { most, budget } = with_world!(decision, dry_run(&compiled, config))?;
    println!("world    {} (dry run on the sample inputs passed)", decision.as_str());
    // Fuel is the budget that stops a runaway decision; show authors their headroom.
    let share = most as f64 * 100.0 / budget.max(1) as f64;
    println!("fuel     {most} per decision at most on the sample inputs, of {budget} ({share:.3} %)");
    Ok(())
}

fn list(names: &[String]) -> String {
    if names.is_empty() { "(none)".to_owned() } else { names.join(", ") }
}
