#!/usr/bin/env bash
# Stops the local cluster and removes its state. Also cleans up after a run that was killed:
# stale pids, processes still chrooted into the Slurm root, ports still held, bind mounts.
set -euo pipefail
source "$(dirname "$0")/env.sh"

stop_pid() {
  local pid=$1
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}

# The demo host and the agent first: it stops the slurmd it started.
for name in host agent kube-apiserver slurmrestd slurmctld etcd; do
  pidfile=$SUNK_STATE/pids/$name.pid
  [[ -f $pidfile ]] && stop_pid "$(cat "$pidfile")"
done
# Anything else still living inside the Slurm root (slurmd, slurmstepd, jobs) belongs to us.
if [[ -d $SLURM_ROOT ]]; then
  real=$(realpath "$SLURM_ROOT")
  for proc in /proc/[0-9]*; do
    [[ "$(readlink "$proc/root" 2>/dev/null)" == "$real" ]] && kill -KILL "${proc#/proc/}" 2>/dev/null
  done
  true
fi
# Ports held by a process this script has no pidfile for (e.g. state dir already removed).
for port in "$ETCD_PORT" "$ETCD_PEER_PORT" "$APISERVER_PORT" "$SLURMCTLD_PORT" "$SLURMRESTD_PORT"; do
  for pid in $(ss -Hltnp "sport = :$port" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); do
    log "killing pid $pid still listening on port $port"
    stop_pid "$pid"
  done
done
sleep 0.2
"$(dirname "$0")/unmount-root.sh"
rm -rf "$SUNK_STATE"
log "local cluster down"
