#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit tests, then the end-to-end tests against a real
# kube-apiserver + etcd and a real Slurm 24.11 brought up on this machine.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../tests/cluster/env.sh"
cd "$SUNK_ROOT"

"$here/setup.sh"
log "cargo fmt --check"
cargo fmt --all --check
log "cargo clippy"
cargo clippy -q --workspace --all-targets -- -D warnings
log "unit tests"
cargo test -q --workspace --exclude sunk-e2e
log "the decision benchmark, once, as a check (sandboxed and native job-mapper agree)"
cargo test -q -p sunk --bench decision
log "building the host (the local cluster packages it as the sunk image)"
cargo build -q -p sunk
log "example policies: build, check and test against their cases"
"$here/policy-examples.sh"

trap '"$SUNK_ROOT/tests/cluster/down.sh" || true' EXIT
[[ -n ${SUNK_KEEP_CLUSTER:-} ]] && trap - EXIT
"$SUNK_ROOT/tests/cluster/up.sh"
log "end-to-end tests"
cargo test -q -p sunk-e2e -- --test-threads=1
log "all tests passed"
