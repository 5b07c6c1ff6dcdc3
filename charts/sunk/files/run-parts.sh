#!/bin/sh
# Slurm's Prolog or Epilog (this script is mounted as /etc/slurm/scripts/prolog and .../epilog): runs
# every executable script of /etc/slurm/<prolog|epilog>.d (the chart's) and .../<...>.d.user (the
# user's ConfigMap) in alphabetical order; the first failure stops the rest, and Slurm drains the node.
set -eu
kind=$(basename "$0")
for dir in "/etc/slurm/$kind.d" "/etc/slurm/$kind.d.user"; do
  [ -d "$dir" ] || continue
  # ConfigMap volumes hold dot-named bookkeeping entries; every other name is a script.
  run-parts --exit-on-error --regex '^[^.].*' "$dir"
done
