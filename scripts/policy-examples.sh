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

# The bundled job-mapper, as compiled into this sunk binary (crates/policy/build.rs writes it to
# OUT_DIR): Cargo names that folder, as the target directory may hold other checkouts' builds too.
out_dir=$(cargo build -q -p sunk --message-format=json | python3 -c '
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if message.get("reason") == "build-script-executed" and "sunk-policy-runtime" in message["package_id"]:
        print(message["out_dir"])')
bundled=$out_dir/job_mapper.wasm
[[ -n $out_dir && -f $bundled ]] || die "the bundled job_mapper.wasm is missing (OUT_DIR of sunk-policy-runtime: $out_dir)"
"$sunk" policy test "$bundled" policies/job-mapper/cases.yaml
