# Shared settings for the local cluster scripts. Sourced, never executed.
#
# Three places:
#   $SUNK_MACHINE_CACHE  what takes minutes to build (the Kubernetes binaries, the Debian roots, the
#                        images, Cargo's target directory), kept per machine outside any checkout so
#                        that a fresh clone on the same machine (CI's) finds it warm. Each entry is
#                        named after a key of the exact inputs that make it (versions, the recipe's
#                        own text): a changed recipe builds a new entry, an unchanged one is never
#                        rebuilt. Cleared with tests/cluster/down.sh && rm -rf ~/.cache/sunk.
#   $SUNK_CACHE          this checkout's logs, and links into the machine cache (.cache/bin).
#   $SUNK_STATE          one run's data, pids and logs; wiped by `down`.
SUNK_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SUNK_MACHINE_CACHE=${SUNK_MACHINE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sunk}
SUNK_CACHE=${SUNK_CACHE:-$SUNK_ROOT/.cache}
SUNK_STATE=${SUNK_STATE:-$SUNK_ROOT/.cluster}

# key_of FILE... [-- WORD...]: 16 hex digits naming exactly these files' contents and these words.
key_of() {
  local files=()
  while (($#)) && [[ $1 != -- ]]; do files+=("$1"); shift; done
  (($#)) && shift
  { cat "${files[@]}"; printf '%s\n' "$@"; } | sha256sum | cut -c1-16
}

KUBE_VERSION=v1.34.4
HELM_VERSION=v3.19.0
COREDNS_VERSION=v1.14.0
# The Kubernetes binaries, CoreDNS and helm (build-kube.sh); $SUNK_CACHE/bin links here.
SUNK_BIN=$SUNK_MACHINE_CACHE/kube-tools/$(key_of "$SUNK_ROOT/tests/cluster/build-kube.sh" \
  "$SUNK_ROOT/tests/cluster/coredns/main.go" -- "$KUBE_VERSION" "$HELM_VERSION" "$COREDNS_VERSION")
DEBIAN_MIRROR=${DEBIAN_MIRROR:-$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null)}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

ETCD_PORT=${ETCD_PORT:-12379}
ETCD_PEER_PORT=${ETCD_PEER_PORT:-12380}
APISERVER_PORT=${APISERVER_PORT:-16443}
SLURMCTLD_PORT=${SLURMCTLD_PORT:-16817}
SLURMRESTD_PORT=${SLURMRESTD_PORT:-16820}
# /metrics of the host up.sh starts to keep the local cluster's NodeSet
NODESET_HOST_HTTP_PORT=${NODESET_HOST_HTTP_PORT:-18080}

export KUBECONFIG=$SUNK_STATE/kubeconfig
export PATH=$SUNK_BIN:$PATH

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Images built from images/*/Containerfile by build-images.sh; nothing is ever pulled. Each archive
# carries a stamp of its inputs beside it.
SUNK_IMAGES=$SUNK_MACHINE_CACHE/images
DEBIAN_IMAGE=docker.io/library/debian:trixie-slim

# The Slurm the local cluster runs (the daemons on this machine and the slurmd image): 26.05, the
# current release, from Debian forky; or 24.11, still supported, from Debian trixie
# (SUNK_SLURM=24.11 ./scripts/test.sh runs the whole suite on it). Each has its own root and images.
SUNK_SLURM=${SUNK_SLURM:-26.05}
case $SUNK_SLURM in
  26.05) SLURM_SUITE=forky ;;
  24.11) SLURM_SUITE=trixie ;;
  *) echo "SUNK_SLURM=$SUNK_SLURM: the local cluster runs Slurm 26.05 or 24.11" >&2; exit 2 ;;
esac
export SUNK_SLURM
SLURM_VERSION=$SUNK_SLURM
SLURM_ROOT=$SUNK_MACHINE_CACHE/slurm-root/$SLURM_VERSION-$(key_of "$SUNK_ROOT/tests/cluster/build-slurm-root.sh" -- "$SLURM_SUITE")
# The Debian the Slurm images are built on (the other images stay on trixie).
SLURM_BASE_IMAGE=docker.io/library/debian:$SLURM_SUITE-slim
# Every Slurm root this machine has built: down.sh cleans up after a cluster of either version.
slurm_roots() { compgen -G "$SUNK_MACHINE_CACHE/slurm-root/*" || true; }
SLURM_IMAGE_REPO=localhost/sunk
PAUSE_IMAGE=localhost/sunk/pause:3.10
BUSYBOX_IMAGE=localhost/sunk/busybox:1.37
MARIADB_IMAGE=localhost/sunk/mariadb:11.8
OPENLDAP_IMAGE=localhost/sunk/openldap:2.6
SUNK_IMAGE=localhost/sunk/sunk:dev

# The cluster's own network, never routed off the machine: one bridge carries every pod of every
# Node; the Nodes' addresses and the control plane live on the same bridge.
BRIDGE=sunk0
BRIDGE_IP=10.244.0.1
POD_CIDR=10.244.0.0/16
SERVICE_CIDR=10.96.0.0/16
DNS_SERVICE_IP=10.96.0.10
# Nodes 1-2 carry the local cluster's NodeSet, 3-5 the tests' own NodeSets; 6-9 are two pairs for the
# chart modules that run beside the others (scripts/e2e.sh).
NODES=(kube-node-1 kube-node-2 kube-node-3 kube-node-4 kube-node-5 kube-node-6 kube-node-7 kube-node-8 kube-node-9)
# node_ip N / node_pod_range N: Node N's address (on the bridge) and the range its pods draw from.
node_ip() { echo "10.244.0.1$1"; }
node_pod_subnet() { echo "10.244.$1.0/24"; }
# Memory every Node offers pods (its allocatable), whatever the machine has.
NODE_MEMORY_MIB=8192

# debootstrap_script SUITE: the script debootstrap bootstraps SUITE with. The machine's debootstrap
# may predate SUITE (bookworm's knows no forky); a Debian suite it lacks bootstraps like sid.
debootstrap_script() {
  local scripts=/usr/share/debootstrap/scripts
  if [[ -e $scripts/$1 ]]; then echo "$scripts/$1"; else echo "$scripts/sid"; fi
}
