#!/usr/bin/env bash
# Builds everything, brings up the local cluster (real kubelets and containers), installs the host
# with the chart (the bundled policy), creates the example pods and shows each running pod's Node
# next to its Slurm job; then installs the whole cluster a user gets (its own Slurm, accounting, a
# login node) and logs in to it as a user (demo-whole-cluster.sh).
# The cluster stays up afterwards; tests/cluster/down.sh stops it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../tests/cluster/env.sh"
cd "$SUNK_ROOT"

"$here/setup.sh"
log "building sunk"
cargo build -q -p sunk
"$SUNK_ROOT/tests/cluster/up.sh"

log "installing the host with Helm (charts/sunk, release sunk in namespace sunk-system)"
# The pod scheduler and the Syncer, as a pod from the sunk image; the local cluster's Slurm (host
# processes behind the Services of namespace slurm) and its NodeSet, kept by the host up.sh started.
kubectl create namespace sunk-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl -n sunk-system create secret generic slurm-jwt-key --from-file=jwt.key="$SUNK_STATE/slurm-etc/jwt.key" \
  --dry-run=client -o yaml | kubectl apply -f - >/dev/null
helm upgrade --install sunk charts/sunk -n sunk-system --wait --timeout 120s -f examples/helm/tenancy.yaml \
  --set image.repository="${SUNK_IMAGE%:*}" --set image.tag="${SUNK_IMAGE##*:}" \
  --set scheduler.name=sunk --set nodesetController.enabled=false --set nodesetController.namespace=slurm \
  --set replicas=1 --set leaderElection.enabled=false >/dev/null

# A second run replaces the example pods, so what it shows is placed afresh.
kubectl delete -f examples/pods/ --ignore-not-found --wait >/dev/null
kubectl apply -f examples/pods/ >/dev/null
log "waiting for the example pods to be placed by Slurm and started by their kubelets"
waiting=unknown
for _ in $(seq 120); do
  waiting=$(kubectl get pods -n demo -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -vc '^Running$' || true)
  [[ $waiting -eq 0 ]] && break
  sleep 1
done

echo
echo "Each pod, the Kubernetes Node it was bound to, and its Slurm job (from squeue):"
python3 - <(kubectl get pods -n demo -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name}|{.spec.nodeName}|{.status.phase}|{.status.conditions[?(@.type=="PodScheduled")].message}{"\n"}{end}') \
  <(chroot "$SLURM_ROOT" squeue -h -o '%j|%i|%T|%N|%b|%l|%a') <<'PY'
import sys
jobs = {}
for line in open(sys.argv[2]):
    name, *rest = line.rstrip("\n").split("|")
    jobs[name] = rest
row = "{:<28} {:<12} {:<8} {:>5} {:<8} {:<10} {:<12} {:<10} {}"
print(row.format("POD", "KUBE NODE", "PHASE", "JOB", "STATE", "SLURM NODE", "GRES", "TIME LIMIT", "ACCOUNT"))
for line in open(sys.argv[1]):
    pod, node, phase, why = line.rstrip("\n").split("|")
    job_id, state, slurm_node, gres, limit, account = jobs.get(pod, ["-"] * 6)
    print(row.format(pod, node or "-", phase, job_id, state, slurm_node or "-", gres, limit, account))
    if not node:
        print("    ", why)
PY
if [[ $waiting != 0 ]]; then
  kubectl get events -n demo --sort-by=.lastTimestamp | tail -20
  die "$waiting example pod(s) not Running after 120 s (above: each pod, its job, and the namespace's events)"
fi
echo
echo "The NodeSet that keeps a slurmd pod (a Slurm dynamic node) on each GPU Node, with Slurm's view of them:"
kubectl get nodesets -A
echo
echo "A cordon is a Slurm drain (the Syncer asks the bundled drain policy for the reason):"
kubectl cordon kube-node-2 >/dev/null
drained() { chroot "$SLURM_ROOT" sinfo -h -N -n kube-node-2 -o %T | grep -q drain; }
for _ in $(seq 100); do drained && break; sleep 0.2; done
drained || die "cordoning kube-node-2 did not drain its Slurm node within 20 s"
# One line per node, not per partition.
chroot "$SLURM_ROOT" sinfo -R -N -n kube-node-2 -o '%20N %10T %E' | uniq
# The Syncer mirrors Slurm's drain back onto the Node at its next pass.
slurm_drain() { kubectl get node kube-node-2 -o jsonpath='{.status.conditions[?(@.type=="SlurmDrain")].status}'; }
for _ in $(seq 100); do [[ $(slurm_drain) == True ]] && break; sleep 0.2; done
kubectl get node kube-node-2 -o jsonpath='{range .status.conditions[?(@.type=="SlurmDrain")]}  Node condition SlurmDrain={.status}: {.message}{"\n"}{end}'
kubectl uncordon kube-node-2 >/dev/null
for _ in $(seq 100); do drained || break; sleep 0.2; done
drained && die "uncordoning kube-node-2 did not resume its Slurm node within 20 s"
echo "  uncordoned: Slurm node kube-node-2 is $(chroot "$SLURM_ROOT" sinfo -h -N -n kube-node-2 -o %T | sort -u) again"
echo
"$here/demo-whole-cluster.sh"
echo
log "demo running. KUBECONFIG=$KUBECONFIG; stop everything with tests/cluster/down.sh"
log "hot-reload a policy: target/debug/sunk policy build examples/policies/team-accounts -o team-accounts.wasm"
log "  && target/debug/sunk policy push team-accounts.wasm && kubectl apply -f examples/policies/team-accounts/pod.yaml"
