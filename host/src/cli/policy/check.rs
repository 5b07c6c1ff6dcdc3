//! `sunk policy check <module>`: world, imports, size, and a dry run on the world's sample inputs.

use anyhow::Result;
use clap::Args;

use super::{ModuleArgs, with_world};
use crate::policy::{Module, World, component_interface, sha256_hex};

#[derive(Args)]
pub struct CheckArgs {
    #[command(flatten)]
    module: ModuleArgs,
}

pub fn run(args: CheckArgs) -> Result<()> {
    let bytes = args.module.bytes()?;
    println!("module   {}", args.module.module.display());
    println!("size     {} bytes", bytes.len());
    println!("sha256   {}", sha256_hex(&bytes));
    let (imports, exports) = component_interface(&bytes)?;
    println!("imports  {}", list(&imports));
    println!("exports  {}", list(&exports));
    let decision = args.module.decision(&bytes)?;
    let config = args.module.config()?;
    with_world!(decision, dry_run(&bytes, config))?;
    println!("world    {} (dry run on the sample inputs passed)", decision.as_str());
    Ok(())
}

fn dry_run<W: World>(bytes: &[u8], config: Option<String>) -> Result<()> {
    Module::<W>::load(bytes, config)?.dry_run()
}

fn list(names: &[String]) -> String {
    if names.is_empty() { "(none)".to_owned() } else { names.join(", ") }
}
