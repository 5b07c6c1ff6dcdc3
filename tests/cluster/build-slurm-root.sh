#!/usr/bin/env bash
# Makes a Debian root holding Slurm $SUNK_SLURM (slurmctld, slurmd, slurmrestd, JWT plugin) and etcd,
# under $SLURM_ROOT: forky for 26.05, trixie for 24.11 (the machine itself runs bookworm, which has
# neither). Built once per version and recipe (SLURM_ROOT's key, env.sh), then kept.
set -euo pipefail
source "$(dirname "$0")/env.sh"

packages=slurmctld,slurmd,slurmrestd,slurm-client,slurm-wlm-jwt-plugin,slurm-wlm-basic-plugins,etcd-server,curl,ca-certificates
stamp=$SLURM_ROOT/.sunk-complete
if [[ -f $stamp ]]; then
  log "slurm root: cached in $SLURM_ROOT"
  exit 0
fi

if ! command -v debootstrap >/dev/null; then
  log "installing debootstrap"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null
fi
mkdir -p "$SUNK_CACHE"
# This version's roots of older recipes go, and a root left half-made by a killed run: each may
# still have bind mounts under it.
for root in "$SUNK_MACHINE_CACHE/slurm-root/$SLURM_VERSION"-*; do
  [[ -e $root ]] || continue
  "$(dirname "$0")/unmount-root.sh" "$root"
  rm -rf --one-file-system "$root"
done
mkdir -p "$SLURM_ROOT"
log "debootstrap $SLURM_SUITE with Slurm $SLURM_VERSION into $SLURM_ROOT"
debootstrap --variant=minbase --include="$packages" "$SLURM_SUITE" "$SLURM_ROOT" "$DEBIAN_MIRROR" \
  "$(debootstrap_script "$SLURM_SUITE")" >"$SUNK_CACHE/debootstrap.log" 2>&1 \
  || { tail -20 "$SUNK_CACHE/debootstrap.log"; die "debootstrap failed"; }
version=$(chroot "$SLURM_ROOT" /usr/sbin/slurmctld -V)
log "$version"
[[ $version == "slurm-wlm $SLURM_VERSION."* ]] || die "$SLURM_SUITE has $version, not Slurm $SLURM_VERSION"
echo "$packages" >"$stamp"
