//! `sunk policy bench <module>`: decision latency percentiles, next to the bundled default's.

use anyhow::{Context as _, Result, bail};
use clap::Args;

use super::{ModuleArgs, with_world};
use crate::latency::Latencies;
use crate::policy::{Compiled, Module, World};

#[derive(Args)]
pub struct BenchArgs {
    #[command(flatten)]
    module: ModuleArgs,
    /// Decisions timed per input and module.
    #[arg(long, default_value_t = 2000)]
    iterations: usize,
}

pub fn run(args: BenchArgs) -> Result<()> {
    if args.iterations == 0 {
        bail!("--iterations must be at least 1");
    }
    let (_, compiled) = args.module.compile()?;
    let decision = args.module.decision(&compiled)?;
    let config = args.module.config()?;
    with_world!(decision, bench(&compiled, config, args.iterations))
}

fn bench<W: World>(compiled: &Compiled, config: Option<String>, iterations: usize) -> Result<()> {
    let module = compiled.module::<W>(config)?;
    let bundled = Module::<W>::bundled()?;
    println!("{iterations} decisions per input and module, one at a time, each in a fresh sandbox");
    println!("{:<32} {:<8} {:>9} {:>9} {:>9} {:>9}", "input", "module", "p50 µs", "p95 µs", "p99 µs", "max µs");
    for input in W::samples() {
        let name: String = W::summarize_input(&input).chars().take(32).collect();
        for (label, module) in [("yours", &module), ("bundled", &bundled)] {
            let latencies = Latencies::measure(iterations, || module.decide(&input).map(drop))
                .with_context(|| format!("the {label} module failed on {name}"))?;
            let [p50, p95, p99, max] = latencies.summary_micros();
            println!("{name:<32} {label:<8} {p50:>9.1} {p95:>9.1} {p99:>9.1} {max:>9.1}");
        }
    }
    Ok(())
}
