# Shared settings for the local cluster scripts. Sourced, never executed.
# Everything the cluster needs lives under $SUNK_CACHE (built once, kept) and
# $SUNK_STATE (one run's data, pids and logs; wiped by `down`).
SUNK_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SUNK_CACHE=${SUNK_CACHE:-$SUNK_ROOT/.cache}
SUNK_STATE=${SUNK_STATE:-$SUNK_ROOT/.cluster}
SUNK_BIN=$SUNK_CACHE/bin
SLURM_ROOT=$SUNK_CACHE/slurm-root

KUBE_VERSION=v1.34.4
HELM_VERSION=v3.19.0
DEBIAN_MIRROR=${DEBIAN_MIRROR:-$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null)}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

ETCD_PORT=${ETCD_PORT:-12379}
ETCD_PEER_PORT=${ETCD_PEER_PORT:-12380}
APISERVER_PORT=${APISERVER_PORT:-16443}
SLURMCTLD_PORT=${SLURMCTLD_PORT:-16817}
SLURMRESTD_PORT=${SLURMRESTD_PORT:-16820}
# slurmd ports are handed out from here upwards, one per slurmd pod
SLURMD_PORT_BASE=${SLURMD_PORT_BASE:-17000}

export KUBECONFIG=$SUNK_STATE/kubeconfig
export PATH=$SUNK_BIN:$PATH

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
