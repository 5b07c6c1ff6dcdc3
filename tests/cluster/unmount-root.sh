#!/usr/bin/env bash
# Unmounts everything mounted under the Slurm root, deepest first. Safe to run at any time.
set -euo pipefail
source "$(dirname "$0")/env.sh"
[[ -d $SLURM_ROOT ]] || exit 0
real=$(realpath "$SLURM_ROOT")
awk -v root="$real/" 'index($2, root) == 1 {print $2}' /proc/mounts | sort -r | while read -r mnt; do
  umount -l "$mnt" 2>/dev/null || true
done
