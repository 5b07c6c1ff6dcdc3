#!/usr/bin/env bash
# Makes a Debian trixie root holding Slurm 24.11 (slurmctld, slurmd, slurmrestd, JWT plugin) and etcd,
# under $SLURM_ROOT. The host is bookworm; Slurm 24.11 exists only in trixie. Built once, then kept.
set -euo pipefail
source "$(dirname "$0")/env.sh"

packages=slurmctld,slurmd,slurmrestd,slurm-client,slurm-wlm-jwt-plugin,slurm-wlm-basic-plugins,etcd-server,curl,ca-certificates
stamp=$SLURM_ROOT/.sunk-complete
if [[ -f $stamp && "$(cat "$stamp")" == "$packages" ]]; then
  log "slurm root: cached"
  exit 0
fi

if ! command -v debootstrap >/dev/null; then
  log "installing debootstrap"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null
fi
# A root left half-made by a killed run may still have bind mounts under it.
"$(dirname "$0")/unmount-root.sh"
rm -rf "$SLURM_ROOT"
mkdir -p "$SLURM_ROOT"
log "debootstrap trixie with Slurm into $SLURM_ROOT"
debootstrap --variant=minbase --include="$packages" trixie "$SLURM_ROOT" "$DEBIAN_MIRROR" >"$SUNK_CACHE/debootstrap.log" 2>&1 \
  || { tail -20 "$SUNK_CACHE/debootstrap.log"; die "debootstrap failed"; }
chroot "$SLURM_ROOT" /usr/sbin/slurmctld -V
echo "$packages" >"$stamp"
