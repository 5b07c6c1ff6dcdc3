#!/usr/bin/env bash
# Imports every image archive of the cluster's Slurm version (build-images.sh) into one containerd
# root, kept in the machine cache under a key of the archives' input stamps and containerd's version,
# and prints its path. node.sh gives each Node's containerd a copy of it: hard links, but for the
# databases each containerd writes. Importing into every Node's containerd on its own hashed and
# unpacked 1.4 GB per Node, minutes of both cores for nine Nodes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
source "$here/lib.sh"

archives=("$SUNK_IMAGES"/*.tar "$SUNK_IMAGES/slurm-$SLURM_VERSION"/*.tar)
key=$(cat "${archives[@]/%.tar/.inputs}" | key_of /dev/stdin -- "$SLURM_VERSION" "$(containerd --version)")
store=$SUNK_MACHINE_CACHE/image-store/$SLURM_VERSION-$key
if [[ -f $store/.complete ]]; then
  echo "$store"
  exit 0
fi

log "importing the images into the image store $store"
rm -rf "$SUNK_MACHINE_CACHE/image-store/$SLURM_VERSION"-*
partial=$store.partial
state=$(mktemp -d)
mkdir -p "$partial/root"
cat >"$state/containerd.toml" <<TOML
version = 2
root = "$partial/root"
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
stop() { stop_pid "$containerd"; rm -rf "$state"; }
trap stop EXIT
ctr() { command ctr --address "$state/containerd.sock" --namespace k8s.io "$@"; }
wait_for "the image store's containerd" 30 ctr version
for archive in "${archives[@]}"; do
  ctr images import --all-platforms --snapshotter overlayfs "$archive" >/dev/null
done
stop
trap - EXIT
touch "$partial/.complete"
mv -T "$partial" "$store"
echo "$store"
