#!/usr/bin/env bash
# Brings up the local cluster, all of it on this machine and on a bridge of its own:
#   control plane  etcd, kube-apiserver (RBAC + Node authorization, ServiceAccount admission),
#                  kube-controller-manager, kube-scheduler, CoreDNS, kube-proxy
#   five Nodes     a kubelet with its own containerd each, pods on the cluster bridge
#   Slurm          26.05 (SUNK_SLURM=24.11 for 24.11): slurmctld and slurmrestd as host processes, and the NodeSet `slurm/gpu`: one slurmd
#                  pod (a dynamic node, from the slurmd image) on each GPU Node, kept by a sunk host
#                  that runs only the NodeSet controller
# Idempotent: tears down whatever a previous (possibly killed) run left, then starts afresh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
source "$here/lib.sh"

"$here/build-kube.sh"
"$here/build-slurm-root.sh"
"$here/build-images.sh"
"$here/down.sh"

mkdir -p "$SUNK_STATE"/{pids,logs,etcd,pki,slurm/ctld,slurm-etc,fake-gpus}
chmod 755 "$SUNK_STATE" && chmod 777 "$SUNK_STATE/logs"
rootstate=/sunk-state
in_root() { chroot "$SLURM_ROOT" "$@"; }
# apply_with_addresses FILE: kubectl apply FILE with the cluster's addresses and ports filled in.
apply_with_addresses() {
  sed -e "s|@BRIDGE_IP@|$BRIDGE_IP|g" -e "s|@SLURMCTLD_PORT@|$SLURMCTLD_PORT|g" \
    -e "s|@SLURMRESTD_PORT@|$SLURMRESTD_PORT|g" "$1" | kubectl apply -f - >/dev/null
}

"$here/network.sh" up

# --- the Slurm root (etcd and the Slurm daemons run from it) ---------------------------------------
# Tests, the demo and the benchmarks find this cluster's Slurm through these two, whatever its version.
ln -sfn "$SLURM_ROOT" "$SUNK_STATE/slurm-root"
echo "$SLURM_VERSION" >"$SUNK_STATE/slurm-version"
cp /etc/hosts "$SLURM_ROOT/etc/hosts"
for fs in proc sys dev; do mount --bind "/$fs" "$SLURM_ROOT/$fs"; done
mkdir -p "$SLURM_ROOT$rootstate" "$SLURM_ROOT/etc/slurm"
mount --bind "$SUNK_STATE" "$SLURM_ROOT$rootstate"
mount --bind "$SUNK_STATE/slurm-etc" "$SLURM_ROOT/etc/slurm"

log "starting etcd"
start etcd chroot "$SLURM_ROOT" /usr/bin/etcd --name sunk --data-dir "$rootstate/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "sunk=http://127.0.0.1:$ETCD_PEER_PORT" --unsafe-no-fsync --log-level warn

# --- credentials ------------------------------------------------------------------------------------
pki=$SUNK_STATE/pki
# sign NAME SUBJECT EXTENSIONS: a key and a certificate signed by the cluster CA.
sign() {
  openssl req -newkey rsa:2048 -nodes -subj "$2" -keyout "$pki/$1.key" -out "$pki/$1.csr" 2>/dev/null
  openssl x509 -req -in "$pki/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 365 \
    -extfile <(printf '%s\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n' "$3") \
    -out "$pki/$1.crt" 2>/dev/null
}
openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj /CN=sunk-local-ca \
  -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
sign apiserver /CN=kube-apiserver "extendedKeyUsage=serverAuth
subjectAltName=IP:$BRIDGE_IP,IP:127.0.0.1,IP:${SERVICE_CIDR%.0/16}.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
# How the API server proves itself to kubelets (logs, exec, port-forward).
sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "extendedKeyUsage=clientAuth"
openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
# One identity per component, so RBAC and the Node authorizer see who is asking.
{
  echo "$(openssl rand -hex 24),admin,admin,system:masters"
  echo "$(openssl rand -hex 24),system:kube-controller-manager,kcm"
  echo "$(openssl rand -hex 24),system:kube-scheduler,scheduler"
  echo "$(openssl rand -hex 24),system:kube-proxy,kube-proxy"
  echo "$(openssl rand -hex 24),system:coredns,coredns"
  for node in "${NODES[@]}"; do echo "$(openssl rand -hex 24),system:node:$node,$node,system:nodes"; done
} >"$pki/tokens.csv"
kubeconfig "$KUBECONFIG" admin "$(token_of admin)"
for component in kube-controller-manager kube-scheduler kube-proxy coredns; do
  kubeconfig "$SUNK_STATE/$component.kubeconfig" "system:$component" "$(token_of "system:$component")"
done

# --- control plane ----------------------------------------------------------------------------------
wait_for etcd 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health"
log "starting kube-apiserver $KUBE_VERSION on $BRIDGE_IP"
start kube-apiserver "$SUNK_BIN/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$ETCD_PORT" --bind-address "$BRIDGE_IP" --advertise-address "$BRIDGE_IP" \
  --secure-port "$APISERVER_PORT" --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
  --client-ca-file "$pki/ca.crt" --token-auth-file "$pki/tokens.csv" \
  --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
  --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
  --kubelet-preferred-address-types InternalIP \
  --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
  --service-account-issuer https://kubernetes.default.svc --service-cluster-ip-range "$SERVICE_CIDR" \
  --allow-privileged --profiling=false --v 1
wait_for kube-apiserver 60 kubectl get --raw /readyz

log "starting kube-controller-manager, kube-scheduler"
start kube-controller-manager "$SUNK_BIN/kube-controller-manager" \
  --kubeconfig "$SUNK_STATE/kube-controller-manager.kubeconfig" --use-service-account-credentials \
  --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
  --cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
  --leader-elect=false --bind-address 127.0.0.1 --secure-port 10257 --profiling=false --v 1
start kube-scheduler "$SUNK_BIN/kube-scheduler" --kubeconfig "$SUNK_STATE/kube-scheduler.kubeconfig" \
  --leader-elect=false --bind-address 127.0.0.1 --secure-port 10259 --profiling=false --v 1

# Cluster DNS: CoreDNS as a host process on the bridge, behind the kube-dns Service like any cluster's.
apply_with_addresses "$here/cluster-services.yaml"
sed -e "s|@BRIDGE_IP@|$BRIDGE_IP|g" -e "s|@KUBECONFIG@|$SUNK_STATE/coredns.kubeconfig|" "$here/Corefile.in" >"$SUNK_STATE/Corefile"
log "starting CoreDNS, kube-proxy"
start coredns "$SUNK_BIN/coredns" -conf "$SUNK_STATE/Corefile"
# One kube-proxy: the Nodes share this machine's network namespace and so its iptables.
start kube-proxy "$SUNK_BIN/kube-proxy" --kubeconfig "$SUNK_STATE/kube-proxy.kubeconfig" \
  --hostname-override "${NODES[0]}" --proxy-mode iptables --cluster-cidr "$POD_CIDR" \
  --nodeport-addresses "$POD_CIDR" --conntrack-max-per-core 0 --conntrack-tcp-timeout-established 0 \
  --conntrack-tcp-timeout-close-wait 0 --metrics-bind-address 127.0.0.1:10249 --healthz-bind-address 127.0.0.1:10256 --v 1

# --- Nodes ------------------------------------------------------------------------------------------
SUNK_IMAGE_STORE=$("$here/image-store.sh")
export SUNK_IMAGE_STORE
log "starting ${NODES[*]}: containerd (a copy of the image store) and kubelet each"
node_pids=()
for i in "${!NODES[@]}"; do
  "$here/node.sh" $((i + 1)) &
  node_pids+=($!)
done
for pid in "${node_pids[@]}"; do wait "$pid" || die "a Node failed to start"; done
nodes_ready() {
  [[ "$(kubectl get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True)" -eq ${#NODES[@]} ]]
}
wait_for "${#NODES[@]} Ready Nodes" 120 nodes_ready
# GPUs, advertised the way a device plugin would (an extended resource on the Node's status), on
# the first two Nodes; the others are plain CPU Nodes (the NodeSet tests use them).
gpu_models=(A100 H100)
for i in 0 1; do
  kubectl label node "${NODES[i]}" --overwrite "nvidia.com/gpu.product=${gpu_models[i]}" sunk.dev/pool=gpu >/dev/null
  kubectl patch node "${NODES[i]}" --subresource=status --type=json \
    -p '[{"op":"add","path":"/status/capacity/nvidia.com~1gpu","value":"2"}]' >/dev/null
done

# --- Slurm ------------------------------------------------------------------------------------------
etc=$SUNK_STATE/slurm-etc
sed -e "s|@HOST@|$(hostname)|" -e "s|@ADDR@|$BRIDGE_IP|" -e "s|@STATE@|$rootstate|g" \
  -e "s|@SLURMCTLD_PORT@|$SLURMCTLD_PORT|" "$here/slurm.conf.in" >"$etc/slurm.conf"
# The chart's confinement: each job's cgroup inside its slurmd pod's.
printf '%s\n' CgroupPlugin=autodetect IgnoreSystemd=yes ConstrainCores=yes ConstrainRAMSpace=yes \
  ConstrainDevices=yes >"$etc/cgroup.conf"
# No GPUs here: character devices stand in for them (slurmd wants a File= for each GPU), with
# NVIDIA's numbers and no driver behind them: opening one fails with ENXIO where a job's cgroup lets
# it through, EPERM where it does not. The slurmd pods mount them at /dev/nvidia0 and /dev/nvidia1;
# their Slurm nodes are named after their Nodes, and their GPU type is the Node's model label,
# lowercased.
for i in 0 1; do mknod "$SUNK_STATE/fake-gpus/nvidia$i" c 195 "$i"; done
for i in 0 1; do
  echo "NodeName=${NODES[i]} Name=gpu Type=${gpu_models[i],,} File=/dev/nvidia[0-1]"
done >"$etc/gres.conf"
head -c 64 /dev/urandom >"$etc/slurm.key"
head -c 64 /dev/urandom >"$etc/jwt.key"
slurm_uid=$(in_root id -u slurm)
chown "$slurm_uid:$slurm_uid" "$etc/slurm.key" "$etc/jwt.key" "$SUNK_STATE/slurm/ctld"
chmod 600 "$etc/slurm.key" "$etc/jwt.key"
log "starting slurmctld"
start slurmctld chroot "$SLURM_ROOT" /usr/sbin/slurmctld -D -i
wait_for slurmctld 30 in_root scontrol ping
log "starting slurmrestd"
# slurmrestd refuses to run as root or as SlurmUser. It listens on the bridge for pods too. It lists
# an array's pending tasks in full (SLURM_BITSTR_LEN=0) and has 8 worker threads, as the chart's does.
start slurmrestd chroot --userspec=nobody:nogroup "$SLURM_ROOT" /usr/bin/env SLURM_JWT=daemon SLURM_BITSTR_LEN=0 \
  /usr/sbin/slurmrestd -t 8 -a rest_auth/jwt -s openapi/slurmctld "127.0.0.1:$SLURMRESTD_PORT" "$BRIDGE_IP:$SLURMRESTD_PORT"
token=$(in_root scontrol token username=root lifespan=300 | cut -d= -f2)
wait_for slurmrestd 30 curl -sf -H "X-SLURM-USER-TOKEN: $token" "http://127.0.0.1:$SLURMRESTD_PORT/slurm/v0.0.42/ping"

# Slurm as pods see it: Services in namespace slurm in front of the host processes, and the auth key
# the slurmd pods mount.
apply_with_addresses "$here/slurm-services.yaml"
kubectl -n slurm create secret generic slurm-key --from-file=slurm.key="$etc/slurm.key" \
  --dry-run=client -o yaml | kubectl apply -f - >/dev/null

log "starting the cluster's host (NodeSet controller only) and the NodeSet slurm/gpu"
"$SUNK_ROOT/target/debug/sunk" crds | kubectl apply -f - >/dev/null
kubectl wait --for condition=established --timeout 30s crd/nodesets.sunk.dev >/dev/null
# Its Syncer and pool audit are off: the tests run their own, and two would argue over the same Nodes.
start nodeset-host "$SUNK_ROOT/target/debug/sunk" host --scheduler=false --syncer=false --pool-audit=false \
  --nodeset-namespace slurm \
  --kubeconfig "$KUBECONFIG" --slurm-url "http://127.0.0.1:$SLURMRESTD_PORT" --slurm-jwt-key "$etc/jwt.key" \
  --slurmctld-address "slurmctld.slurm.svc.cluster.local:6817" --policy-namespace slurm \
  --http-addr "127.0.0.1:$NODESET_HOST_HTTP_PORT"
sed -e "s|@FAKE_GPUS@|$SUNK_STATE/fake-gpus|g" -e "s|@SLURMD_IMAGE@|$SLURM_IMAGE_REPO/slurmd:$SLURM_VERSION|" \
  "$here/nodeset.yaml" | kubectl apply -f - >/dev/null
idle_nodes() { [[ "$(in_root sinfo -h -N -t idle -o %N | sort -u | wc -l)" -ge 2 ]]; }
wait_for "two idle Slurm nodes" 120 idle_nodes
in_root sinfo -N -o '%N %T %c %m %G %f' >&2
kubectl get nodes -o wide >&2
kubectl get nodesets -A >&2
log "local cluster up: KUBECONFIG=$KUBECONFIG, slurmrestd http://127.0.0.1:$SLURMRESTD_PORT, JWT key $etc/jwt.key"
