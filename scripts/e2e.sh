#!/usr/bin/env bash
# The end-to-end part of the test suite, the last step of scripts/test.sh: the local cluster of
# $SUNK_SLURM brought up, the end-to-end tests, the restarts, a chaos run, the cluster torn down.
#
# --slurm-dependent-only leaves out the modules whose tests exercise nothing that differs between
# Slurm releases (policies, RBAC, namespace scopes, tenancy, leader election, a hostile slurmrestd):
# .ci/run passes it on its second run, on 24.11, after the whole suite ran on 26.05.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../tests/cluster/env.sh"
cd "$SUNK_ROOT"

release_independent=(policy:: policy_failures:: chart_rbac:: chart:: chart_scope:: scheduler_scope:: tenancy:: ha::
  hostile_slurmrestd::)
skips=()
case ${1:-} in
  "") ;;
  --slurm-dependent-only) for module in "${release_independent[@]}"; do skips+=(--skip "$module"); done ;;
  *) die "usage: $0 [--slurm-dependent-only]" ;;
esac

"$here/setup.sh"
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
log "end-to-end tests${skips:+ (those that depend on the Slurm release)}"
cargo test -q -p sunk-e2e -- --test-threads=1 "${skips[@]}" 2>&1 | tee "$SUNK_STATE/logs/e2e-output.txt"
log "end-to-end: restarts of the API server, slurmctld and slurmrestd"
cargo test -q -p sunk-e2e -- --ignored --test-threads=1 2>&1 | tee -a "$SUNK_STATE/logs/e2e-output.txt"
log "chaos: the chart's host under a steady workload while every kind of fault strikes, invariants checked"
cargo run -q -p sunk-e2e --bin chaos -- --minutes "${SUNK_CHAOS_MINUTES:-4}" 2>&1 | tee -a "$SUNK_STATE/logs/e2e-output.txt"
log "all tests passed"
