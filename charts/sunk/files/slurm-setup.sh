#!/bin/sh
# Init container of slurmctld and slurmdbd (root): Slurm wants its keys, and slurmdbd.conf with the
# database password, owned by SlurmUser with mode 0600, which a Secret volume cannot give a non-root
# user, so the configuration and the keys are copied into /etc/slurm (an emptyDir shared with the
# daemon and its sidecar), with the users and groups the daemon resolves (identity-setup.sh).
# slurmctld waits here for slurmdbd when Slurm keeps accounts: on a first start without it,
# slurmctld has no TRES from the database and exits.
set -eu
src=/etc/slurm-src
for file in "$src"/*.conf "$src"/*.yaml; do
  [ -e "$file" ] || continue
  install -o slurm -g slurm -m 0644 "$file" "/etc/slurm/$(basename "$file")"
done
for key in slurm.key jwt.key; do
  [ -e "$src/$key" ] && install -o slurm -g slurm -m 0600 "$src/$key" "/etc/slurm/$key"
done
sh "$(dirname "$0")/identity-setup.sh"
if [ -e /etc/slurm/slurmdbd.conf ]; then
  printf 'StoragePass=%s\n' "$(cat /etc/sunk/database/password)" >>/etc/slurm/slurmdbd.conf
  chmod 0600 /etc/slurm/slurmdbd.conf
fi
for dir in /etc/slurm /var/spool/slurmctld /run/slurmctld /run/slurmdbd; do
  [ -d "$dir" ] && chown slurm:slurm "$dir" && chmod 0755 "$dir"
done
if [ -n "${WAIT_FOR_SLURMDBD:-}" ]; then
  host=${WAIT_FOR_SLURMDBD%:*} port=${WAIT_FOR_SLURMDBD##*:}
  for _ in $(seq 300); do
    timeout 2 bash -c "</dev/tcp/$host/$port" 2>/dev/null && break
    echo "waiting for slurmdbd at $WAIT_FOR_SLURMDBD"
    sleep 2
  done
fi
echo "slurm setup: $(ls /etc/slurm | tr '\n' ' ')"
