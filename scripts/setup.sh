#!/usr/bin/env bash
# Installs what building and testing sunk needs on a fresh Debian machine, and builds the cached
# parts of the local cluster (the Kubernetes binaries, CoreDNS, helm, the Slurm root) unless given
# --packages-only. Safe to run again. The images are built by tests/cluster/up.sh, once the host
# binary they package exists.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../tests/cluster/env.sh"

missing=()
# command:package. The Nodes of the local cluster need containerd, runc, the CNI plugins, iptables
# and conntrack (kube-proxy); buildah builds the images without a daemon; promtool (with Prometheus)
# checks and unit-tests the chart's alerts (scripts/check-alerts.sh, with python3's yaml).
for tool in debootstrap:debootstrap openssl:openssl curl:curl ss:iproute2 setsid:util-linux python3:python3 \
  containerd:containerd runc:runc iptables:iptables conntrack:conntrack buildah:buildah objcopy:binutils \
  /usr/lib/cni/bridge:containernetworking-plugins promtool:prometheus; do
  command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
python3 -c 'import yaml' 2>/dev/null || missing+=(python3-yaml)
if ((${#missing[@]})); then
  log "installing ${missing[*]}"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
fi
command -v go >/dev/null || die "Go is needed to build Kubernetes, CoreDNS and helm"
command -v rustup >/dev/null || die "rustup is needed"
# Policies are WebAssembly components: the bundled ones are built for wasm32-unknown-unknown (no
# WASI imports at all); wasm32-wasip2 is there for operators' own policies.
rustup target add wasm32-unknown-unknown wasm32-wasip2 >/dev/null 2>&1 || rustup target add wasm32-unknown-unknown wasm32-wasip2
rustup component add rustfmt clippy >/dev/null 2>&1 || true

# Cargo's target directory lives in the machine cache too: a fresh clone then rebuilds only the
# workspace's own crates, not its dependencies. A checkout that has a target directory of its own
# keeps it. The cache is emptied when it outgrows 40 GiB (each checkout path builds its own copy of
# the workspace's crates).
cargo_target=$SUNK_MACHINE_CACHE/cargo-target
mkdir -p "$cargo_target"
if (($(du -s --block-size=1G "$cargo_target" | cut -f1) > 40)); then
  log "emptying $cargo_target (over 40 GiB)"
  rm -rf "$cargo_target" && mkdir -p "$cargo_target"
fi
[[ -e $SUNK_ROOT/target || -L $SUNK_ROOT/target ]] || ln -s "$cargo_target" "$SUNK_ROOT/target"

[[ ${1:-} == --packages-only ]] && exit 0
"$SUNK_ROOT/tests/cluster/build-kube.sh"
"$SUNK_ROOT/tests/cluster/build-slurm-root.sh"
