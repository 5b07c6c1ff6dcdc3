//! `sunk policy test <module> <cases.yaml>`: a module's answers against expected ones.

use std::path::PathBuf;

use anyhow::{Context as _, Result, bail};
use clap::Args;
use serde_json::Value;

use super::cases::{self, Case, ErrorKind};
use super::{ModuleArgs, with_world};
use crate::policy::{Compiled, Module, World};

#[derive(Args)]
pub struct TestArgs {
    #[command(flatten)]
    module: ModuleArgs,
    /// The YAML file of cases.
    cases: PathBuf,
}

pub fn run(args: TestArgs) -> Result<()> {
    let file = cases::read(&args.cases)?;
    let (_, compiled) = args.module.compile()?;
    let decision = match cases::decision(&file, args.module.decision)? {
        Some(decision) => decision,
        None => args.module.decision(&compiled)?,
    };
    let config = args.module.config()?.or(file.config);
    let failed = with_world!(decision, run_cases(&compiled, config, &file.cases))?;
    let passed = file.cases.len() - failed;
    println!("{}: {passed} passed, {failed} failed", args.cases.display());
    if failed > 0 {
        bail!("{failed} of {} cases failed", file.cases.len());
    }
    Ok(())
}

/// Runs every case, printing one line each; returns how many failed.
fn run_cases<W: World>(compiled: &Compiled, config: Option<String>, cases: &[Case]) -> Result<usize> {
    let module = compiled.module::<W>(config).with_context(|| format!("loading the module as {}", W::NAME))?;
    let sample = W::samples().into_iter().next().context("the world has no sample input")?;
    let sample = serde_json::to_value(sample)?;
    let mut failed = 0;
    for (index, case) in cases.iter().enumerate() {
        match run_case(&module, &sample, case).with_context(|| format!("cases[{index}] ({})", case.name))? {
            None => println!("ok    {}", case.name),
            Some(why) => {
                failed += 1;
                println!("FAIL  {}: {why}", case.name);
            }
        }
    }
    Ok(failed)
}

/// Why the case failed, or `None` when it passed. An error is a case that cannot run at all.
fn run_case<W: World>(module: &Module<W>, sample: &Value, case: &Case) -> Result<Option<String>> {
    let input = input::<W>(sample, &case.input)?;
    let outcome = module.decide(&input);
    Ok(match (outcome, &case.expect, case.expect_error) {
        (Ok(output), Some(expected), _) => {
            let actual = serde_json::to_value(&output)?;
            cases::mismatch(expected, &actual).map(|why| format!("{why}\n      answer: {actual}"))
        }
        (Ok(output), None, _) => Some(format!("expected an error, got {}", serde_json::to_value(&output)?)),
        (Err(error), _, Some(kind)) if ErrorKind::of(&error) == kind => None,
        (Err(error), _, _) => Some(format!("the module failed: {error}")),
    })
}

/// `sample` (the world's first sample input) with the case's `input` merged over it.
fn input<W: World>(sample: &Value, overlay: &Value) -> Result<W::Input> {
    let mut input = sample.clone();
    cases::merge(&mut input, overlay);
    let input: W::Input = serde_json::from_value(input).context("`input` does not fit the world's input record")?;
    // The records ignore fields they do not know: a misspelt one would silently test nothing.
    if let Some(why) = cases::mismatch(overlay, &serde_json::to_value(&input)?) {
        bail!("`input` is not what the world's input record holds: {why}");
    }
    Ok(input)
}
