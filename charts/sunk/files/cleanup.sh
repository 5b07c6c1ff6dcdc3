#!/bin/bash
# pre-delete hook: deletes the release's NodeSets while their host still runs, and waits until the
# host has drained and removed every slurmd pod and Slurm node record (a NodeSet never kills a
# running job, so this waits for running jobs: cancel them, or raise `helm uninstall --timeout`).
# Without it the host would go first and leave the NodeSets stuck on their finalizer.
# Env: NAMESPACE, SELECTOR (URL-encoded label selector), SLURMRESTD, JWT_KEY.
# The image has openssl, not curl.
set -euo pipefail
source /etc/sunk/scripts/slurm-api.sh
sa=/var/run/secrets/kubernetes.io/serviceaccount
kube() {
  printf '%s %s HTTP/1.1\r\nHost: kubernetes.default.svc\r\nAuthorization: Bearer %s\r\nAccept: application/json\r\nConnection: close\r\n\r\n' \
    "$1" "$2" "$(cat "$sa/token")" |
    openssl s_client -quiet -connect "$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT" -CAfile "$sa/ca.crt" \
      -verify_return_error -verify_hostname kubernetes.default.svc 2>/dev/null
}
nodesets="/apis/sunk.dev/v1alpha1/namespaces/$NAMESPACE/nodesets?labelSelector=$SELECTOR"
response=$(kube DELETE "$nodesets")
echo "deleting the release's NodeSets: $(status_line "$response")"
[[ $(status_line "$response") == *" 200 "* ]]
until [[ $(kube GET "$nodesets") == *'"items":[]'* ]]; do
  echo "waiting for the NodeSets to be gone (their host drains each Slurm node, then removes it)"
  sleep 2
done
until [[ $(slurm_node_count) == 0 ]]; do
  echo "waiting for Slurm's node records to be gone"
  sleep 2
done
echo "NodeSets, slurmd pods and Slurm node records removed"
