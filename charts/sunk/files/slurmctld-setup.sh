#!/bin/sh
# Init container of slurmctld (root): Slurm wants its keys owned by SlurmUser with mode 0600, which a
# Secret volume cannot give a non-root user, so the configuration and the keys are copied into
# /etc/slurm (an emptyDir shared with slurmctld and its reconfigure sidecar).
set -eu
src=/etc/slurm-src
for file in "$src"/*.conf "$src"/*.yaml; do
  [ -e "$file" ] || continue
  install -o slurm -g slurm -m 0644 "$file" "/etc/slurm/$(basename "$file")"
done
for key in slurm.key jwt.key; do
  install -o slurm -g slurm -m 0600 "$src/$key" "/etc/slurm/$key"
done
chown slurm:slurm /etc/slurm /var/spool/slurmctld /run/slurmctld
echo "slurmctld setup: $(ls /etc/slurm | tr '\n' ' ')"
