#!/usr/bin/env bash
# Unmounts everything mounted under the given Slurm roots (default: every version's), deepest first.
# Safe to run at any time.
set -euo pipefail
source "$(dirname "$0")/env.sh"
roots=("$@")
((${#roots[@]})) || mapfile -t roots < <(slurm_roots)
for root in "${roots[@]}"; do
  [[ -d $root ]] || continue
  real=$(realpath "$root")
  awk -v root="$real/" 'index($2, root) == 1 {print $2}' /proc/mounts | sort -r | while read -r mnt; do
    umount -l "$mnt" 2>/dev/null || true
  done
done
