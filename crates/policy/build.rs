//! Builds the bundled policies into the policy runtime (and so into the host binary).
//!
//! Each policy crate is built for `wasm32-unknown-unknown` with the workspace's `policy` profile by a
//! nested `cargo build` (own target directory, so it never waits on the outer build's lock), then the
//! core module is turned into a component with `wit-component`. Building for `wasm32-unknown-unknown`
//! rather than `wasm32-wasip2` keeps WASI out of the component: it imports only `sunk:policy/host`.
//!
//! The test fixtures of the abuse suite and the example policies (which the unit tests hold to the fuel
//! budget) are built the same way (they are small); one fixture is built for `wasm32-wasip2` on
//! purpose, to import WASI.

use std::env;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

const PROFILE: &str = "policy";

/// A component to build into OUT_DIR.
struct Component {
    package: &'static str,
    /// File written to OUT_DIR.
    file: &'static str,
    target: Target,
}

#[derive(Clone, Copy)]
enum Target {
    /// A core module, turned into a component here.
    Bare,
    /// rustc's linker already makes a component, with WASI imports.
    Wasip2,
}

impl Target {
    fn triple(self) -> &'static str {
        match self {
            Target::Bare => "wasm32-unknown-unknown",
            Target::Wasip2 => "wasm32-wasip2",
        }
    }
}

const COMPONENTS: &[Component] = &[
    Component { package: "sunk-policy-job-mapper", file: "job_mapper.wasm", target: Target::Bare },
    Component { package: "sunk-policy-preemption", file: "preemption.wasm", target: Target::Bare },
    Component { package: "sunk-policy-drain", file: "drain.wasm", target: Target::Bare },
    Component { package: "sunk-policy-abuse", file: "abuse.wasm", target: Target::Bare },
    Component { package: "sunk-policy-wasi-import", file: "wasi_import.wasm", target: Target::Wasip2 },
    Component { package: "sunk-example-team-accounts", file: "team_accounts.wasm", target: Target::Bare },
    Component { package: "sunk-example-drain-runbook", file: "drain_runbook.wasm", target: Target::Bare },
];

fn main() {
    if let Err(error) = run() {
        // `{:#}` prints the whole chain on one line, without anyhow's backtrace noise.
        eprintln!("error: {error:#}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").context("CARGO_MANIFEST_DIR")?);
    let workspace =
        manifest_dir.ancestors().nth(2).context("the policy runtime crate is not in crates/")?.to_path_buf();
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").context("OUT_DIR")?);

    for watched in
        ["policies", "tests/policies", "examples/policies", "wit", "Cargo.toml", "Cargo.lock", ".cargo/config.toml"]
    {
        println!("cargo:rerun-if-changed={}", workspace.join(watched).display());
    }
    println!("cargo:rerun-if-changed=build.rs");

    for target in [Target::Bare, Target::Wasip2] {
        check_wasm_target(target.triple())?;
    }
    let target_dir = workspace.join("target").join("policies");
    for component in COMPONENTS {
        let (package, target) = (component.package, component.target);
        let built = build_wasm(&workspace, &target_dir, package, target.triple())?;
        let bytes = match target {
            Target::Bare => componentize(&built).with_context(|| format!("turning {package} into a component"))?,
            Target::Wasip2 => built,
        };
        let out = out_dir.join(component.file);
        fs::write(&out, bytes).with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(())
}

/// Fails early, with the fix, when the standard library for a wasm target is not installed.
fn check_wasm_target(triple: &str) -> Result<()> {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let output = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .with_context(|| format!("running {} --print sysroot", rustc.to_string_lossy()))?;
    if !output.status.success() {
        bail!("`rustc --print sysroot` failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let sysroot = PathBuf::from(String::from_utf8(output.stdout)?.trim());
    if !sysroot.join("lib/rustlib").join(triple).join("lib").is_dir() {
        bail!(
            "the Rust target {triple} is not installed (needed to build the bundled policies); \
             run `rustup target add {triple}`"
        );
    }
    Ok(())
}

/// Runs the nested `cargo build` and returns the `.wasm` file's bytes.
fn build_wasm(workspace: &Path, target_dir: &Path, package: &str, triple: &str) -> Result<Vec<u8>> {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .arg("build")
        .arg("--manifest-path")
        .arg(workspace.join("Cargo.toml"))
        .args(["-p", package, "--target", triple, "--profile", PROFILE])
        .arg("--target-dir")
        .arg(target_dir);
    for (key, _) in env::vars_os() {
        if leaks_from_outer_build(&key) {
            command.env_remove(&key);
        }
    }
    let output = command.output().with_context(|| format!("running cargo build for {package}"))?;
    if !output.status.success() {
        bail!("building {package} for {triple} failed:\n{}", String::from_utf8_lossy(&output.stderr));
    }
    let artifact = target_dir.join(triple).join(PROFILE).join(format!("{}.wasm", package.replace('-', "_")));
    fs::read(&artifact).with_context(|| format!("reading {}", artifact.display()))
}

/// Environment the outer cargo set for this build script (or for the outer build) that must not steer
/// the nested build: flags and wrappers meant for the host target, the outer target directory, and the
/// build-script variables. Registry, network, terminal and jobserver settings pass through.
fn leaks_from_outer_build(key: &OsString) -> bool {
    let Some(key) = key.to_str() else {
        return false;
    };
    const KEEP: &[&str] = &["CARGO_HOME", "CARGO_MAKEFLAGS"];
    const KEEP_PREFIXES: &[&str] =
        &["CARGO_NET_", "CARGO_HTTP_", "CARGO_REGISTRIES_", "CARGO_REGISTRY_", "CARGO_TERM_"];
    const REMOVE: &[&str] = &[
        "RUSTFLAGS",
        "RUSTDOCFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CLIPPY_ARGS",
        "TARGET",
        "HOST",
        "OUT_DIR",
        "PROFILE",
        "OPT_LEVEL",
        "DEBUG",
        "NUM_JOBS",
        "RUSTC_LINKER",
    ];
    if REMOVE.contains(&key) {
        return true;
    }
    if key == "CARGO" || KEEP.contains(&key) || KEEP_PREFIXES.iter().any(|p| key.starts_with(p)) {
        return false;
    }
    // CARGO_ENCODED_RUSTFLAGS, CARGO_TARGET_DIR, CARGO_BUILD_*, CARGO_TARGET_<triple>_*,
    // CARGO_CFG_*, CARGO_FEATURE_*, CARGO_PKG_*, CARGO_MANIFEST_*, CARGO_PROFILE_*, ...
    key.starts_with("CARGO_")
}

/// Turns a core module built with wit-bindgen into a component (what `wasm-tools component new` does).
fn componentize(core: &[u8]) -> Result<Vec<u8>> {
    wit_component::ComponentEncoder::default().module(core)?.validate(true).encode()
}
