#!/usr/bin/env bash
# A short account of the local cluster for a failed run's output, where CI shows it: Slurm's jobs and
# nodes as they are, Slurm's warnings and errors, and the logs of the hosts the failing tests started
# (arguments: the failing tests' names as libtest prints them). The whole logs stay in logs/ (and,
# after a failed scripts/test.sh, in .cache/failed-run-logs).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
logs=$SUNK_STATE/logs
[[ -d $logs ]] || exit 0

section() { printf '\n--- %s\n' "$1"; }
strip_colour() { sed 's/\x1b\[[0-9;]*m//g'; }

section "Slurm jobs (squeue -a)"
timeout 10 chroot "$SUNK_STATE/slurm-root" squeue -a -o '%.12i %.10T %.28j %.22R %.8M %V' 2>&1 | head -40
section "Slurm nodes (sinfo -N)"
timeout 10 chroot "$SUNK_STATE/slurm-root" sinfo -N -o '%N %T %c %O %E' 2>&1 | head -20
section "slurmctld: last warnings and errors"
grep -a -E 'error|WARN|fatal' "$logs/slurmctld.log" 2>/dev/null | uniq | tail -n 15
for pod in $(timeout 10 kubectl -n slurm get pods -o name 2>/dev/null); do
  section "slurmd ${pod#pod/}: last lines"
  timeout 10 kubectl -n slurm logs "$pod" --all-containers --tail 8 2>&1 | cut -c1-300
done
for test in "$@"; do
  for namespace in $(awk -F'\t' -v test="$test" '$1==test{print $2}' "$logs/tests.tsv" 2>/dev/null); do
    [[ -f $logs/host-$namespace.log ]] || continue
    section "$test: its hosts' last lines (logs/host-$namespace.log, without policy decisions)"
    grep -a -v 'sunk::decision' "$logs/host-$namespace.log" | strip_colour | cut -c1-300 | tail -n 40
  done
done
exit 0
