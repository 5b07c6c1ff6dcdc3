#!/usr/bin/env bash
# Brings up the local cluster on 127.0.0.1: etcd + kube-apiserver (RBAC on), Slurm 24.11 (slurmctld,
# slurmrestd with JWT), two fake Nodes with one slurmd pod each, and the test agent playing the kubelet.
# Idempotent: tears down whatever a previous (possibly killed) run left, then starts afresh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"

"$here/build-kube.sh"
"$here/build-slurm-root.sh"
"$here/down.sh"

mkdir -p "$SUNK_STATE"/{pids,logs,etcd,pki,slurm/ctld,slurm/d,slurm-etc}
rootstate=/sunk-state

# start NAME CMD...: runs CMD in the background in its own session, pid in pids/NAME.pid.
start() {
  local name=$1; shift
  setsid "$@" >>"$SUNK_STATE/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$SUNK_STATE/pids/$name.pid"
}
# wait_for WHAT SECONDS CMD...: polls CMD until it succeeds.
wait_for() {
  local what=$1 seconds=$2; shift 2
  for _ in $(seq $((seconds * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  die "$what did not come up in ${seconds}s; logs in $SUNK_STATE/logs"
}
in_root() { chroot "$SLURM_ROOT" "$@"; }

# --- the Slurm root: mounts and files -------------------------------------------------------------
cp /etc/hosts "$SLURM_ROOT/etc/hosts"
for fs in proc sys dev; do mount --bind "/$fs" "$SLURM_ROOT/$fs"; done
mkdir -p "$SLURM_ROOT$rootstate" "$SLURM_ROOT/etc/slurm"
mount --bind "$SUNK_STATE" "$SLURM_ROOT$rootstate"
mount --bind "$SUNK_STATE/slurm-etc" "$SLURM_ROOT/etc/slurm"

# --- etcd -------------------------------------------------------------------------------------------
log "starting etcd"
start etcd chroot "$SLURM_ROOT" /usr/bin/etcd --name sunk --data-dir "$rootstate/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "sunk=http://127.0.0.1:$ETCD_PEER_PORT" --unsafe-no-fsync --log-level warn

# --- kube-apiserver ---------------------------------------------------------------------------------
pki=$SUNK_STATE/pki
openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj /CN=sunk-local-ca \
  -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver -keyout "$pki/apiserver.key" -out "$pki/apiserver.csr" 2>/dev/null
openssl x509 -req -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 365 \
  -extfile <(printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n') \
  -out "$pki/apiserver.crt" 2>/dev/null
openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
admin_token=$(openssl rand -hex 24)
echo "$admin_token,admin,admin,system:masters" >"$pki/tokens.csv"
wait_for etcd 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health"
log "starting kube-apiserver $KUBE_VERSION"
# No kube-controller-manager runs here, so nothing creates `default` ServiceAccounts: the
# ServiceAccount admission plugin is off (pods would otherwise be refused in fresh namespaces).
start kube-apiserver "$SUNK_BIN/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$ETCD_PORT" --bind-address 127.0.0.1 --advertise-address 127.0.0.1 \
  --secure-port "$APISERVER_PORT" --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
  --client-ca-file "$pki/ca.crt" --token-auth-file "$pki/tokens.csv" --authorization-mode RBAC \
  --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
  --service-account-issuer https://kubernetes.default.svc --service-cluster-ip-range 10.96.0.0/16 \
  --disable-admission-plugins ServiceAccount --allow-privileged --profiling=false --v 1
cat >"$KUBECONFIG" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: sunk-local
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 "$pki/ca.crt")
users:
- name: admin
  user:
    token: $admin_token
contexts:
- name: sunk-local
  context: {cluster: sunk-local, user: admin}
current-context: sunk-local
KUBECONFIG
wait_for kube-apiserver 60 kubectl get --raw /readyz

# --- Slurm ------------------------------------------------------------------------------------------
etc=$SUNK_STATE/slurm-etc
sed -e "s|@HOST@|$(hostname)|" -e "s|@STATE@|$rootstate|g" -e "s|@SLURMCTLD_PORT@|$SLURMCTLD_PORT|" \
  "$here/slurm.conf.in" >"$etc/slurm.conf"
echo CgroupPlugin=disabled >"$etc/cgroup.conf"
# No GPUs here: two character devices stand in for them (slurmd ignores file-less GPUs). Every
# slurmd pod of the local cluster declares Gres=gpu:2.
mkdir -p "$SUNK_STATE/fake-gpus"
for i in 0 1; do mknod "$SUNK_STATE/fake-gpus/nvidia$i" c 1 3; done
echo "Name=gpu File=$rootstate/fake-gpus/nvidia[0-1]" >"$etc/gres.conf"
head -c 64 /dev/urandom >"$etc/slurm.key"
head -c 64 /dev/urandom >"$etc/jwt.key"
slurm_uid=$(in_root id -u slurm)
chown "$slurm_uid:$slurm_uid" "$etc/slurm.key" "$etc/jwt.key" "$SUNK_STATE/slurm/ctld"
chmod 600 "$etc/slurm.key" "$etc/jwt.key"
chmod 755 "$SUNK_STATE" "$SUNK_STATE/logs" && chmod 777 "$SUNK_STATE/logs"
log "starting slurmctld"
start slurmctld chroot "$SLURM_ROOT" /usr/sbin/slurmctld -D -i
wait_for slurmctld 30 in_root scontrol ping
log "starting slurmrestd"
# slurmrestd refuses to run as root or as SlurmUser.
start slurmrestd chroot --userspec=nobody:nogroup "$SLURM_ROOT" /usr/bin/env SLURM_JWT=daemon \
  /usr/sbin/slurmrestd -a rest_auth/jwt -s openapi/slurmctld "127.0.0.1:$SLURMRESTD_PORT"
token=$(in_root scontrol token username=root lifespan=300 | cut -d= -f2)
wait_for slurmrestd 30 curl -sf -H "X-SLURM-USER-TOKEN: $token" "http://127.0.0.1:$SLURMRESTD_PORT/slurm/v0.0.42/ping"

# --- fake Nodes, slurmd pods, and the agent that plays the kubelet ---------------------------------
kubectl apply -f "$here/fixtures.yaml" >/dev/null
for node in kube-node-1 kube-node-2; do
  kubectl patch node "$node" --subresource=status --type=merge -p '{"status":{
    "capacity":{"cpu":"4","memory":"8Gi","pods":"110","nvidia.com/gpu":"2"},
    "allocatable":{"cpu":"4","memory":"8Gi","pods":"110","nvidia.com/gpu":"2"},
    "conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"sunk test agent"}]}}' >/dev/null
done
log "building and starting the test agent"
# The same package set as test.sh and demo.sh build, so Cargo unifies features the same way and has
# nothing to rebuild here.
cargo build -q -p sunk -p sunk-test-agent --manifest-path "$SUNK_ROOT/Cargo.toml"
start agent "$SUNK_ROOT/target/debug/sunk-test-agent" --kubeconfig "$KUBECONFIG" --slurm-root "$SLURM_ROOT" \
  --state-dir "$SUNK_STATE" --slurmd-port-base "$SLURMD_PORT_BASE"
idle_nodes() { [[ "$(in_root sinfo -h -N -t idle -o %N | sort -u | wc -l)" -ge 2 ]]; }
wait_for "two idle Slurm nodes" 60 idle_nodes
in_root sinfo -N -o '%N %T %c %m %G %f' >&2
log "local cluster up: KUBECONFIG=$KUBECONFIG, slurmrestd http://127.0.0.1:$SLURMRESTD_PORT, JWT key $etc/jwt.key"
