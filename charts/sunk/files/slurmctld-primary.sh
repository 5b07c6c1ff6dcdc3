#!/bin/sh
# The primary slurmctld's start when a backup stands by (slurmCluster.controller.backup): first the
# backup's pod is deleted through the API server, and slurmctld starts only once that pod is gone.
# A backup in control saves the state on SIGTERM and exits, so the primary loads the latest state,
# and Slurm's own hand-back (REQUEST_CONTROL to a backup in control), which can hang the backup on
# Slurm 26.05.5 and lose the nodes' state, is never asked for. The StatefulSet then starts a new
# backup, which stands by: it waits SlurmctldTimeout for the primary before it would take control.
#
# Fail closed: while the old backup's pod is not seen gone (its Node lost, the API server away),
# slurmctld does not start, since two controllers on one state lose jobs. The container exits and
# its restart tries again; the message says what it waits for.
set -eu
# PID 1 until slurmctld replaces it: a pod deleted meanwhile must not wait out its grace period.
trap 'exit 143' TERM INT
api=https://kubernetes.default.svc
creds=/var/run/secrets/sunk/api
namespace=$(cat "$creds/namespace")
url="$api/api/v1/namespaces/$namespace/pods/$BACKUP_POD"

# Sets $status (the HTTP status, 000 when unanswered) and $body.
request() {
  answer=$(curl -sS --max-time 10 --cacert "$creds/ca.crt" -H "Authorization: Bearer $(cat "$creds/token")" \
    -w '\n%{http_code}' -X "$1" "$url" 2>&1) || true
  status=$(printf '%s\n' "$answer" | tail -n 1)
  body=$(printf '%s\n' "$answer" | sed '$d')
}
# The pod's own uid: the first in the object (metadata.uid precedes its ownerReferences).
uid() { printf '%s' "$body" | grep -o '"uid": *"[^"]*"' | head -n 1 | cut -d '"' -f 4; }

request GET
case $status in
  404) echo "no backup pod $BACKUP_POD: starting slurmctld" ;;
  200)
    old=$(uid)
    [ -n "$old" ] || { echo "reading pod $BACKUP_POD: no uid in $body" >&2; exit 1; }
    echo "stopping the backup slurmctld's pod $BACKUP_POD ($old) before starting"
    request DELETE
    case $status in 200 | 202 | 404) ;; *) echo "deleting pod $BACKUP_POD: HTTP $status: $body" >&2; exit 1 ;; esac
    since=$(date +%s)
    while :; do
      request GET
      waited=$(($(date +%s) - since))
      if [ "$status" = 404 ] || { [ "$status" = 200 ] && [ "$(uid)" != "$old" ]; }; then
        break
      fi
      if [ "$waited" -ge 120 ]; then
        echo "pod $BACKUP_POD ($old) is still there after ${waited}s (HTTP $status); not starting beside it" >&2
        exit 1
      fi
      sleep 1 &
      wait $!
    done
    echo "the backup's pod stopped after ${waited}s: starting slurmctld"
    ;;
  *) echo "reading pod $BACKUP_POD: HTTP $status: $body" >&2; exit 1 ;;
esac
exec /usr/sbin/slurmctld -D -i
