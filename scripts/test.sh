#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit tests, then the end-to-end tests against a real
# kube-apiserver + etcd and a real Slurm brought up on this machine: 26.05, or 24.11 with SUNK_SLURM=24.11.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../tests/cluster/env.sh"
cd "$SUNK_ROOT"

"$here/setup.sh" --packages-only
# The local cluster's parts (Kubernetes, CoreDNS, helm: ten minutes when cold; the Slurm root) build
# while the Rust workspace does: neither keeps both cores busy all the time.
parts_log=$SUNK_CACHE/cluster-parts.log
mkdir -p "$SUNK_CACHE"
log "building the local cluster's parts in the background ($parts_log)"
# A process group of its own, so that a failed check stops the Go build too, not just its shell.
setsid bash -c '"$1" && "$2"' parts "$SUNK_ROOT/tests/cluster/build-kube.sh" "$SUNK_ROOT/tests/cluster/build-slurm-root.sh" \
  >"$parts_log" 2>&1 &
parts=$!
trap 'kill -- -"$parts" 2>/dev/null || true' EXIT

log "cargo fmt --check"
cargo fmt --all --check
log "links in README.md and docs/"
"$here/check-links.sh"
log "cargo clippy"
cargo clippy -q --workspace --all-targets -- -D warnings
log "building the tests and the host"
# The same selections the runs below make, so that nothing is built twice.
cargo test -q --workspace --exclude sunk-e2e --no-run
cargo test -q -p sunk --bench decision --no-run
cargo build -q -p sunk
cargo test -q -p sunk-e2e --no-run

log "waiting for the local cluster's parts"
wait "$parts" || { cat "$parts_log"; die "building the local cluster's parts failed"; }
cat "$parts_log"
trap - EXIT

log "alerting rules and dashboards"
"$here/check-alerts.sh"
log "unit tests"
# Property tests draw their cases from a fixed seed here, so that the suite is deterministic; a plain
# `cargo test` draws new ones (and keeps any failure in proptest-regressions/).
PROPTEST_RNG_SEED=${PROPTEST_RNG_SEED:-20261127} cargo test -q --workspace --exclude sunk-e2e
cargo test -q -p sunk-e2e --lib --bins
log "the decision benchmark, once, as a check (sandboxed and native job-mapper agree)"
cargo test -q -p sunk --bench decision
"$here/e2e.sh"
