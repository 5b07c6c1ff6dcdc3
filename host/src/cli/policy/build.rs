//! `sunk policy build <crate>`: cargo builds the library for wasm32-unknown-unknown, then componentize.
//!
//! `wasm32-unknown-unknown` rather than `wasm32-wasip2` keeps WASI out of the component: policies may
//! import nothing but `sunk:policy/host`. wit-bindgen leaves the world's type information in the core
//! module; `wit-component` turns that into a component, as `wasm-tools component new` does.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context as _, Result, bail};
use clap::Args;

use crate::policy::sha256_hex;

const TARGET: &str = "wasm32-unknown-unknown";

/// Every decision runs in a fresh instance whose dirtied memory is reset afterwards; a 64 KiB stack
/// instead of Rust's 1 MiB halves a decision's cost. (This workspace's `.cargo/config.toml` gives the
/// bundled policies the same.)
const STACK_SIZE_LINK_ARG: &str = "link-arg=-zstack-size=65536";

#[derive(Args)]
pub struct BuildArgs {
    /// The policy crate's directory (holding its Cargo.toml).
    #[arg(default_value = ".")]
    crate_dir: PathBuf,
    /// Where to write the component; `<crate>.wasm` in the current directory by default.
    #[arg(long, short)]
    output: Option<PathBuf>,
}

pub fn run(args: BuildArgs) -> Result<()> {
    let manifest = args.crate_dir.join("Cargo.toml");
    let output = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["rustc", "--lib", "--release", "--target", TARGET, "--message-format", "json-render-diagnostics"])
        .arg("--manifest-path")
        .arg(&manifest)
        // Only the policy crate itself is linked, so only it gets the flag.
        .args(["--", "-C", STACK_SIZE_LINK_ARG])
        .stderr(Stdio::inherit())
        .output()
        .context("running cargo (is Rust installed?)")?;
    if !output.status.success() {
        bail!("cargo build failed for {} (is the target installed? `rustup target add {TARGET}`)", manifest.display());
    }
    let core_path = cdylib_artifact(&output.stdout).with_context(|| {
        format!("cargo built no cdylib .wasm for {}: set `crate-type = [\"cdylib\"]`", manifest.display())
    })?;
    let core = std::fs::read(&core_path).with_context(|| format!("reading {}", core_path.display()))?;
    let component = wit_component::ComponentEncoder::default()
        .module(&core)
        .and_then(|encoder| encoder.validate(true).encode())
        .with_context(|| {
            format!("turning {} into a component (was it built with wit-bindgen?)", core_path.display())
        })?;
    let out = args.output.unwrap_or_else(|| {
        PathBuf::from(core_path.file_name().map(|name| name.to_os_string()).unwrap_or_else(|| "policy.wasm".into()))
    });
    std::fs::write(&out, &component).with_context(|| format!("writing {}", out.display()))?;
    println!("{}  {} bytes  sha256 {}", out.display(), component.len(), sha256_hex(&component));
    Ok(())
}

/// The last `.wasm` file of a cdylib target in cargo's JSON messages.
fn cdylib_artifact(messages: &[u8]) -> Option<PathBuf> {
    let messages = std::str::from_utf8(messages).ok()?;
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|message| message["reason"] == "compiler-artifact")
        .filter(|message| message["target"]["crate_types"].as_array().is_some_and(|t| t.iter().any(|t| t == "cdylib")))
        .flat_map(|message| message["filenames"].as_array().cloned().unwrap_or_default())
        .filter_map(|name| name.as_str().map(PathBuf::from))
        .rfind(|path| path.extension().is_some_and(|ext| ext == "wasm"))
}
