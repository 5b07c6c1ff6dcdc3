#!/usr/bin/env bash
# Imports every image archive of the cluster's Slurm version (build-images.sh) into one containerd
# root kept in the machine cache, and prints its path. node.sh gives each Node's containerd a copy
# of it: hard links, but for the databases each containerd writes. Importing into every Node's
# containerd on its own hashed and unpacked 1.4 GB per Node, minutes of both cores for nine Nodes.
#
# The store is keyed by the input stamps of every image but the host's and by containerd's version.
# The host's image changes with every build of the host, so it is replaced in the store on its own
# (a few seconds) whenever its stamp moves.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
source "$here/lib.sh"

host_archive=$SUNK_IMAGES/sunk.tar host_stamp=$SUNK_IMAGES/sunk.inputs
archives=()
for archive in "$SUNK_IMAGES"/*.tar "$SUNK_IMAGES/slurm-$SLURM_VERSION"/*.tar; do
  [[ $archive == "$host_archive" ]] || archives+=("$archive")
done
key=$(cat "${archives[@]/%.tar/.inputs}" | key_of /dev/stdin -- "$SLURM_VERSION" "$(containerd --version)")
store=$SUNK_MACHINE_CACHE/image-store/$SLURM_VERSION-$key

containerd=
state=$(mktemp -d)
ctr() { command ctr --address "$state/containerd.sock" --namespace k8s.io "$@"; }
stop() {
  [[ -n $containerd ]] && stop_pid "$containerd"
  containerd=
}
trap 'stop; rm -rf "$state"' EXIT
# with_containerd ROOT: a containerd of its own on ROOT, without CRI, for ctr to import into.
with_containerd() {
  cat >"$state/containerd.toml" <<TOML
version = 2
root = "$1"
state = "$state/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$state/containerd.sock"
[ttrpc]
  address = "$state/containerd.sock.ttrpc"
TOML
  containerd --config "$state/containerd.toml" >"$state/containerd.log" 2>&1 &
  containerd=$!
  wait_for "the image store's containerd" 30 ctr version
}
import() { ctr images import --all-platforms --snapshotter overlayfs "$1" >/dev/null; }

if [[ ! -f $store/.complete ]]; then
  log "importing the images into the image store $store"
  rm -rf "$SUNK_MACHINE_CACHE/image-store/$SLURM_VERSION"-*
  mkdir -p "$store.partial/root"
  with_containerd "$store.partial/root"
  for archive in "${archives[@]}"; do import "$archive"; done
  stop
  touch "$store.partial/.complete"
  mv -T "$store.partial" "$store"
fi

if ! cmp -s "$host_stamp" "$store/sunk.inputs"; then
  log "importing the host's image into the image store"
  with_containerd "$store/root"
  # Removed first, so that containerd collects the old image's layers at once.
  ctr images rm --sync "$SUNK_IMAGE" >/dev/null 2>&1 || true
  import "$host_archive"
  stop
  cp "$host_stamp" "$store/sunk.inputs"
fi
echo "$store"
