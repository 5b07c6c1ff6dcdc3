#!/usr/bin/env bash
# The end-to-end part of the test suite, the last step of scripts/test.sh: the local cluster of
# $SUNK_SLURM brought up, the end-to-end tests, the restarts, a chaos run, the cluster torn down.
#
# The tests run in lanes side by side. The modules that install the chart's own Slurm each run on a
# pair of Nodes that no other lane touches (chart_release.rs NODES); every other module shares the
# local cluster's Slurm and its Nodes, so they run one after another in the main lane. Each module is
# timed; the table is printed at the end, slowest first.
#
# --slurm-dependent-only runs only the tests whose outcome depends on the Slurm release, and the
# restarts of its daemons: .ci/run passes it on its second run, on 24.11, after the whole suite ran on
# 26.05.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../tests/cluster/env.sh"
cd "$SUNK_ROOT"

# "Nodes: modules" of each chart lane; the Nodes are the last four of env.sh's NODES.
chart_lanes=("kube-node-6,kube-node-7: chart_slurm chart_backup chart_confinement"
  "kube-node-8,kube-node-9: chart_login chart_accounting")
# What differs between releases: the REST API's version and what it accepts (submission, arrays,
# allocations, multi-node jobs, node updates), how Slurm treats a job no node can hold, an external
# placeholder, a requeue on preemption, a backup controller's hand-back, a job's cgroups
# (docs/testing.md).
release_dependent=(scheduler:: fast_path:: bursts:: gang:: preemption::a_high_priority_pod
  preemption::a_preempted_task preemption::a_slurm_job_of_a_higher_tier syncer::a_cordon_drains chart_backup::
  device_confinement:: chart_confinement:: chart_login::a_users_step_runs_in_an_oci_container)
case ${1:-} in
  "") release_dependent_only= ;;
  --slurm-dependent-only) release_dependent_only=1 ;;
  *) die "usage: $0 [--slurm-dependent-only]" ;;
esac

"$here/setup.sh"
log "building the host (the local cluster packages it as the sunk image) and the end-to-end tests"
cargo build -q -p sunk
cargo test -q -p sunk-e2e --test e2e --no-run
cargo build -q -p sunk-e2e --bin chaos
log "example policies: build, check and test against their cases"
"$here/policy-examples.sh"

# A failed run keeps the cluster's logs (hosts, Slurm, kubelets) for reading after teardown.
keep_logs_of_a_failure() {
  local status=$?
  if ((status != 0)) && [[ -d $SUNK_STATE/logs ]]; then
    local failed
    failed=$(sed -n 's/^---- \(.*\) stdout ----$/\1/p' "$SUNK_STATE"/logs/e2e-*.txt 2>/dev/null)
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
logs=$SUNK_STATE/logs
times=$logs/e2e-times.tsv
: >"$times"

# The units to run: every module, or the release-dependent tests.
if [[ -n $release_dependent_only ]]; then
  units=("${release_dependent[@]}")
else
  mapfile -t units < <(cargo test -q -p sunk-e2e --test e2e -- --list 2>/dev/null | sed -n 's/^\([a-z_0-9]*\)::.*: test$/\1::/p' | sort -u)
fi
# lane_of UNIT: the chart lane whose modules hold UNIT, or main.
lane_of() {
  local lane module
  for lane in "${!chart_lanes[@]}"; do
    for module in ${chart_lanes[lane]#*:}; do
      [[ $1 == "$module::"* ]] && { echo "chart-$lane"; return; }
    done
  done
  echo main
}
declare -A lane_units=()
for unit in "${units[@]}"; do
  lane=$(lane_of "$unit")
  lane_units[$lane]+="$unit "
done

# run_lane LANE NODES UNIT...: each unit on its own, timed; every unit runs even after one failed.
run_lane() {
  local lane=$1 nodes=$2 unit started status failed=0
  shift 2
  for unit in "$@"; do
    started=$SECONDS
    status=0
    env ${nodes:+SUNK_E2E_CHART_NODES=$nodes} cargo test -q -p sunk-e2e --test e2e -- --test-threads=1 "$unit" \
      >>"$logs/e2e-$lane.txt" 2>&1 || status=$?
    printf '%s\t%s\t%s\t%s\n' "$lane" "$unit" $((SECONDS - started)) "$( ((status == 0)) && echo passed || echo FAILED)" \
      >>"$times"
    ((status == 0)) || failed=1
  done
  return "$failed"
}

log "end-to-end tests${release_dependent_only:+ (those whose outcome depends on the Slurm release)}, in lanes:"
pids=() lanes=()
for lane in "${!lane_units[@]}"; do
  nodes=
  [[ $lane == chart-* ]] && { nodes=${chart_lanes[${lane#chart-}]%%:*}; }
  log "  $lane${nodes:+ (on $nodes)}: ${lane_units[$lane]}"
  # shellcheck disable=SC2086 # one unit per word
  run_lane "$lane" "$nodes" ${lane_units[$lane]} &
  pids+=($!) lanes+=("$lane")
done
failed=()
for i in "${!pids[@]}"; do wait "${pids[i]}" || failed+=("${lanes[i]}"); done
for lane in "${lanes[@]}"; do
  grep -v '^$' "$logs/e2e-$lane.txt" | grep -v '^running 0 tests\|0 passed; 0 failed; 0 ignored; 0 measured; [0-9]* filtered out' || true
done
echo
echo "end-to-end time by module, slowest first:"
sort -t$'\t' -k3,3nr "$times" | awk -F'\t' '{printf "  %6d s  %-8s %-40s %s\n", $3, $1, $2, $4}'
((${#failed[@]} == 0)) || die "end-to-end tests failed in lane(s) ${failed[*]}"

log "end-to-end: restarts of the API server, slurmctld and slurmrestd"
cargo test -q -p sunk-e2e --test e2e -- --ignored --test-threads=1 2>&1 | tee "$logs/e2e-restarts.txt"
if [[ -z $release_dependent_only ]]; then
  log "chaos: the chart's host under a steady workload while every kind of fault strikes, invariants checked"
  cargo run -q -p sunk-e2e --bin chaos -- --minutes "${SUNK_CHAOS_MINUTES:-2}" 2>&1 | tee "$logs/e2e-chaos.txt"
fi
log "all tests passed"
