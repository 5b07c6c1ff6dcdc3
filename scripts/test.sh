#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit tests, then the end-to-end tests against a real
# kube-apiserver + etcd and a real Slurm brought up on this machine: 26.05, or 24.11 with SUNK_SLURM=24.11.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../tests/cluster/env.sh"
cd "$SUNK_ROOT"

"$here/setup.sh"
log "cargo fmt --check"
cargo fmt --all --check
log "links in README.md and docs/"
"$here/check-links.sh"
log "cargo clippy"
cargo clippy -q --workspace --all-targets -- -D warnings
log "unit tests"
# Property tests draw their cases from a fixed seed here, so that the suite is deterministic; a plain
# `cargo test` draws new ones (and keeps any failure in proptest-regressions/).
PROPTEST_RNG_SEED=${PROPTEST_RNG_SEED:-20261127} cargo test -q --workspace --exclude sunk-e2e
log "the decision benchmark, once, as a check (sandboxed and native job-mapper agree)"
cargo test -q -p sunk --bench decision
log "building the host (the local cluster packages it as the sunk image)"
cargo build -q -p sunk
log "example policies: build, check and test against their cases"
"$here/policy-examples.sh"

# A failed run keeps the cluster's logs (hosts, Slurm, kubelets) for reading after teardown.
keep_logs_of_a_failure() {
  local status=$?
  if ((status != 0)) && [[ -d $SUNK_STATE/logs ]]; then
    local failed
    failed=$(sed -n 's/^---- \(.*\) stdout ----$/\1/p' "$SUNK_STATE/logs/e2e-output.txt" 2>/dev/null)
    # shellcheck disable=SC2086 # one test name per word
    "$SUNK_ROOT/tests/cluster/diagnose.sh" $failed || true
    rm -rf "$SUNK_CACHE/failed-run-logs" && cp -r "$SUNK_STATE/logs" "$SUNK_CACHE/failed-run-logs" || true
    log "failed (exit $status): the cluster's logs are kept in $SUNK_CACHE/failed-run-logs"
  fi
  "$SUNK_ROOT/tests/cluster/down.sh" || true
}
trap keep_logs_of_a_failure EXIT
[[ -n ${SUNK_KEEP_CLUSTER:-} ]] && trap - EXIT
"$SUNK_ROOT/tests/cluster/up.sh"
log "end-to-end tests"
cargo test -q -p sunk-e2e -- --test-threads=1 2>&1 | tee "$SUNK_STATE/logs/e2e-output.txt"
log "end-to-end: restarts of the API server, slurmctld and slurmrestd"
cargo test -q -p sunk-e2e -- --ignored --test-threads=1 2>&1 | tee -a "$SUNK_STATE/logs/e2e-output.txt"
log "chaos: the chart's host under a steady workload while every kind of fault strikes, invariants checked"
cargo run -q -p sunk-e2e --bin chaos -- --minutes "${SUNK_CHAOS_MINUTES:-4}" 2>&1 | tee -a "$SUNK_STATE/logs/e2e-output.txt"
log "all tests passed"
