#!/usr/bin/env bash
# Stops the local cluster and removes its state. Also cleans up after a run that was killed: stale
# pids, container shims and processes, processes still chrooted into the Slurm root, ports still
# held, mounts (kubelet volumes, container root filesystems, pod network namespaces), the Nodes'
# cgroups, the bridge and the iptables rules. Safe to run when nothing is up.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
source "$here/lib.sh"

# stop NAME...: stops these processes (by pidfile) side by side, and waits for all of them.
stop() {
  local name pidfile
  for name in "$@"; do
    pidfile=$SUNK_STATE/pids/$name.pid
    [[ -f $pidfile ]] && stop_pid "$(cat "$pidfile")" &
  done
  wait
}
# The demo host first, then the kubelets (so they stop starting containers), then the rest.
stop host nodeset-host
stop "${NODES[@]/#/kubelet-}"
stop kube-proxy coredns kube-scheduler kube-controller-manager "${NODES[@]/#/containerd-}"
stop kube-apiserver slurmrestd slurmctld etcd

# Containers outlive containerd: their shims (started with our state dir in their arguments) and
# every process in a Node's cgroups go.
for proc in /proc/[0-9]*; do
  if tr '\0' ' ' <"$proc/cmdline" 2>/dev/null | grep -q -- "containerd-shim.*-address $SUNK_STATE/"; then
    kill -KILL "${proc#/proc/}" 2>/dev/null || true
  fi
done
node_cgroups() { find /sys/fs/cgroup/*/ -maxdepth 1 -type d -name 'sunk-kube-node-*' 2>/dev/null; }
for cgroup in $(node_cgroups); do
  find "$cgroup" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
done
# Anything else still living inside a Slurm root (the daemons, jobs) belongs to us, whichever Slurm
# version the cluster ran.
for root in $(slurm_roots); do
  real=$(realpath "$root")
  for proc in /proc/[0-9]*; do
    [[ "$(readlink "$proc/root" 2>/dev/null)" == "$real" ]] && kill -KILL "${proc#/proc/}" 2>/dev/null
  done
  true
done
# Ports held by a process this script has no pidfile for (e.g. state dir already removed).
for port in "$ETCD_PORT" "$ETCD_PEER_PORT" "$APISERVER_PORT" "$SLURMCTLD_PORT" "$SLURMRESTD_PORT"; do
  for pid in $(ss -Hltnp "sport = :$port" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); do
    log "killing pid $pid still listening on port $port"
    stop_pid "$pid"
  done
done
sleep 0.2

# Mounts under the state dir (kubelet volumes, container root filesystems, shm), deepest first.
if [[ -d $SUNK_STATE ]]; then
  findmnt -rn -o TARGET | awk -v s="$(realpath "$SUNK_STATE")/" 'index($0, s) == 1' | sort -r |
    while read -r target; do umount -l "$target" 2>/dev/null || true; done
fi
"$here/unmount-root.sh"
# Pod network namespaces our containerds made (containerd names them cni-<uuid> under /run/netns).
for netns in /run/netns/cni-*; do
  [[ -e $netns ]] || continue
  ip netns pids "${netns##*/}" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
  umount -l "$netns" 2>/dev/null || true
  rm -f "$netns"
done
# The Nodes' cgroups, leaves first (a cgroup can be removed once it has no processes).
for cgroup in $(node_cgroups); do
  find "$cgroup" -depth -type d -exec rmdir {} + 2>/dev/null || true
done
"$here/network.sh" down
rm -rf "$SUNK_STATE"
log "local cluster down"
