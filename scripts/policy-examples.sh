#!/usr/bin/env bash
# Builds the example policies into target/examples/ with `sunk policy build`, then checks and tests them
# (and the bundled job-mapper) against their cases, the way a policy author would. Needs target/debug/sunk.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../tests/cluster/env.sh"
cd "$SUNK_ROOT"

sunk=target/debug/sunk
[[ -x $sunk ]] || die "$sunk is missing: cargo build -p sunk"
mkdir -p target/examples
for example in team-accounts drain-runbook protected-accounts; do
  dir=examples/policies/$example
  module=target/examples/$example.wasm
  "$sunk" policy build "$dir" -o "$module"
  "$sunk" policy check "$module" --config-file "$dir/config.example"
  "$sunk" policy test "$module" "$dir/cases.yaml"
done

# The abuse suite's hostile job-mapper, for the end-to-end tests of a module that fails.
"$sunk" policy build tests/policies/abuse -o target/examples/abuse.wasm

# The bundled job-mapper, as compiled into this sunk binary (crates/policy/build.rs writes it to OUT_DIR).
bundled=$(ls -t target/debug/build/sunk-policy-runtime-*/out/job_mapper.wasm 2>/dev/null | head -n1)
[[ -n $bundled ]] || die "the bundled job_mapper.wasm is missing under target/debug/build/sunk-*/out"
"$sunk" policy test "$bundled" policies/job-mapper/cases.yaml
