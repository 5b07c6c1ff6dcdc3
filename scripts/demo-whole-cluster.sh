#!/usr/bin/env bash
# The demo's second part (scripts/demo.sh runs it on the cluster it brought up): the whole cluster a
# user gets, examples/helm/whole-cluster.yaml installed as release hpc in namespace hpc on
# kube-node-3 and kube-node-4. alice logs in with SSH, submits jobs, reads their output in her shared
# home, and squeue on the login node lists her job beside a pod's placeholder: one pool.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../tests/cluster/env.sh"
cd "$SUNK_ROOT"

namespace=hpc
demo=$SUNK_STATE/demo
key=$demo/id_ed25519
mkdir -p "$demo/home"
[[ -f $key ]] || ssh-keygen -q -t ed25519 -N "" -C alice -f "$key"

log "installing the whole cluster (examples/helm/whole-cluster.yaml, release hpc in namespace hpc)"
kubectl label node kube-node-3 kube-node-4 sunk.dev/pool=cpu --overwrite >/dev/null
kubectl create namespace "$namespace" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
# The shared home and slurmctld's state (both controllers mount it): hostPath volumes serve, since
# the local cluster's Nodes are one machine. The database stays on an emptyDir (persistence off): the
# demo keeps no accounts across clusters. A claim gone (the namespace was deleted), its volume is
# Released and binds no new claim: made afresh, the files stay.
shared_volume() {
  local name=$1 claim=$2 path=$3
  if [[ $(kubectl get pv "$name" -o jsonpath='{.status.phase}' 2>/dev/null) == Released ]]; then
    kubectl delete pv "$name" --wait >/dev/null
  fi
  kubectl apply -f - >/dev/null <<VOLUME
apiVersion: v1
kind: PersistentVolume
metadata: {name: $name}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteMany]
  storageClassName: ""
  persistentVolumeReclaimPolicy: Retain
  hostPath: {path: $path, type: DirectoryOrCreate}
  claimRef: {namespace: $namespace, name: $claim}
VOLUME
}
shared_volume hpc-home hpc-sunk-home "$demo/home"
shared_volume hpc-slurmctld-state hpc-sunk-slurmctld-state "$demo/slurmctld-state"
images=()
for daemon in slurmctld slurmrestd slurmd slurmdbd login; do
  images+=(--set "slurmCluster.images.$daemon.repository=$SLURM_IMAGE_REPO/$daemon" --set "slurmCluster.images.$daemon.tag=$SLURM_VERSION")
done
alice=$(printf '[{"name":"alice","uid":1000,"gid":1000,"sshAuthorizedKeys":["%s"]}]' "$(cat "$key.pub")")
helm upgrade --install hpc charts/sunk -n "$namespace" --wait --timeout 300s -f examples/helm/whole-cluster.yaml \
  --set image.repository="${SUNK_IMAGE%:*}" --set image.tag="${SUNK_IMAGE##*:}" "${images[@]}" \
  --set slurmCluster.images.mariadb.repository="${MARIADB_IMAGE%:*}" --set slurmCluster.images.mariadb.tag="${MARIADB_IMAGE##*:}" \
  --set-json "slurmCluster.identity.users=$alice" \
  --set slurmCluster.accounting.database.persistence.enabled=false >/dev/null

# alice trusts only the login node's host key, read from its Secret.
address=$(kubectl -n "$namespace" get service hpc-sunk-login -o jsonpath='{.spec.clusterIP}')
host_key=$(kubectl -n "$namespace" get secret hpc-sunk-login-host-key \
  -o go-template='{{index .data "ssh_host_ecdsa_key" | base64decode}}' | ssh-keygen -y -f /dev/stdin)
echo "$address $host_key" >"$demo/known_hosts"
as_alice() {
  ssh -o BatchMode=yes -o ConnectTimeout=5 -o StrictHostKeyChecking=yes -o UserKnownHostsFile="$demo/known_hosts" \
    -i "$key" "alice@$address" "$@"
}
for _ in $(seq 60); do as_alice true 2>/dev/null && break; sleep 2; done
as_alice true || die "alice cannot log in to the login node at $address"
# A second run starts from an empty queue.
as_alice scancel -u alice
kubectl -n "$namespace" delete pod notebook --ignore-not-found --wait >/dev/null

kubectl -n "$namespace" apply -f - >/dev/null <<'POD'
apiVersion: v1
kind: Pod
metadata: {name: notebook}
spec:
  schedulerName: hpc-hpc
  terminationGracePeriodSeconds: 5
  containers:
  - name: notebook
    image: localhost/sunk/busybox:1.37
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 1; done"]
    resources: {requests: {cpu: 500m, memory: 128Mi}}
POD
echo
echo "alice logs in (ssh alice@$address, the login Service) and submits two jobs:"
echo "  alice@login\$ sbatch --wrap 'id -un; hostname; pwd'"
quick=$(as_alice sbatch --parsable --mem=100 --wrap "'id -un; hostname; pwd'")
echo "  alice@login\$ sbatch --wrap 'sleep 600'"
sleeping=$(as_alice sbatch --parsable --mem=100 --wrap "'sleep 600'")
running() { as_alice squeue -h -t RUNNING -o %i | grep -cx -e "$sleeping" -e "$(placeholder)" || true; }
placeholder() { as_alice squeue -h -n "$namespace/notebook" -o %i; }
both=false
for _ in $(seq 60); do [[ $(running) == 2 ]] && both=true && break; sleep 2; done
$both || die "alice's job and the pod's placeholder are not both running after 120 s"
for _ in $(seq 30); do as_alice test -s "slurm-$quick.out" && break; sleep 1; done
echo "  alice@login\$ cat slurm-$quick.out    # ran as alice on a slurmd pod, from her shared home"
as_alice cat "slurm-$quick.out" | sed 's/^/    /'
echo "  alice@login\$ squeue                 # her job beside pod hpc/notebook's placeholder"
as_alice squeue -o "'%.5i %.18j %.7u %.4a %.8T %N'" | sed 's/^/    /'
echo "  alice@login\$ sacct -X -j ...         # accounting, pods included"
as_alice sacct -X -j "$quick,$sleeping,$(placeholder)" -o JobID,JobName%18,User,Account,State | sed 's/^/    /'
echo "  alice@login\$ scontrol ping         # the primary slurmctld, and the backup standing by"
as_alice scontrol ping | sed 's/^/    /'
as_alice scontrol ping | grep -q '^Slurmctld(backup) .* is UP' || die "the backup slurmctld does not answer"
echo "  kubectl -n hpc get pod notebook      # the pod, on the Node its placeholder runs on"
kubectl -n "$namespace" get pod notebook -o wide | awk '{print "    " $1, $2, $3, $7}'
