#!/bin/sh
# Sidecar of slurmctld: applies a changed slurm.conf, gres.conf, cgroup.conf or topology.yaml (the
# ConfigMap volume the kubelet refreshes in place) with `scontrol reconfigure`. Replacing the pod instead would lose
# slurmctld's state when it lives on an emptyDir, and with it every running job.
set -u
src=/etc/slurm-src
changed() {
  for file in "$src"/*.conf "$src"/*.yaml; do
    [ -e "$file" ] || continue
    [ "$(md5sum <"$file")" = "$(md5sum <"/etc/slurm/$(basename "$file")" 2>/dev/null)" ] || return 0
  done
  return 1
}
pending=false
# PID 1 of its container: without a handler SIGTERM would be ignored, holding the pod's deletion for
# its whole grace period.
trap 'exit 0' TERM INT
while :; do
  sleep "${RECONFIGURE_INTERVAL:-5}" &
  wait $!
  if changed; then
    for file in "$src"/*.conf "$src"/*.yaml; do
      [ -e "$file" ] || continue
      name=$(basename "$file")
      cp "$file" "/etc/slurm/.$name.new" && mv "/etc/slurm/.$name.new" "/etc/slurm/$name"
    done
    pending=true
  fi
  $pending || continue
  # A backup's sidecar (RECONFIGURE_ONLY_WITHOUT_PRIMARY) leaves the controller in control to the
  # primary's; its own copies above are what the backup reads when it takes control.
  if [ -n "${RECONFIGURE_ONLY_WITHOUT_PRIMARY:-}" ] && scontrol ping | grep -q '^Slurmctld(primary) .* is UP'; then
    pending=false
    continue
  fi
  if scontrol reconfigure; then
    pending=false
    echo "configuration changed: slurmctld reconfigured"
  else
    echo "configuration changed, but scontrol reconfigure failed; retrying"
  fi
done
