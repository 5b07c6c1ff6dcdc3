#!/usr/bin/env bash
# Makes a Debian root holding Slurm $SUNK_SLURM (slurmctld, slurmd, slurmrestd, JWT plugin) and etcd,
# under $SLURM_ROOT: forky for 26.05, trixie for 24.11 (the machine itself runs bookworm, which has
# neither). Built once per version, then kept.
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
# Before roots were per version, .cache/slurm-root held 24.11: keep it rather than build it again.
legacy=$SUNK_CACHE/slurm-root
if [[ $SLURM_VERSION == 24.11 && -d $legacy && ! -e $SLURM_ROOT ]] && grep -qs slurmctld "$legacy/.sunk-complete"; then
  "$(dirname "$0")/unmount-root.sh" "$legacy"
  mv "$legacy" "$SLURM_ROOT"
  [[ -f $stamp && "$(cat "$stamp")" == "$packages" ]] && { log "slurm root: cached"; exit 0; }
fi
# A root left half-made by a killed run may still have bind mounts under it.
"$(dirname "$0")/unmount-root.sh" "$SLURM_ROOT"
rm -rf "$SLURM_ROOT"
mkdir -p "$SLURM_ROOT"
log "debootstrap $SLURM_SUITE with Slurm $SLURM_VERSION into $SLURM_ROOT"
debootstrap --variant=minbase --include="$packages" "$SLURM_SUITE" "$SLURM_ROOT" "$DEBIAN_MIRROR" \
  "$(debootstrap_script "$SLURM_SUITE")" >"$SUNK_CACHE/debootstrap.log" 2>&1 \
  || { tail -20 "$SUNK_CACHE/debootstrap.log"; die "debootstrap failed"; }
version=$(chroot "$SLURM_ROOT" /usr/sbin/slurmctld -V)
log "$version"
[[ $version == "slurm-wlm $SLURM_VERSION."* ]] || die "$SLURM_SUITE has $version, not Slurm $SLURM_VERSION"
echo "$packages" >"$stamp"
