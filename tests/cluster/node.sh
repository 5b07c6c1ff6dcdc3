#!/usr/bin/env bash
# Starts Kubernetes Node N (1-based) of the local cluster: its own containerd (runc, CNI bridge),
# the project's images imported into it, and a kubelet registering as ${NODES[N-1]}.
#
# Every Node gets its own containerd: a kubelet removes pod sandboxes it does not know, so two
# kubelets must never share one. The Nodes share the machine's network namespace, so they share
# one kube-proxy (started by up.sh); each has its own address on the cluster bridge.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
source "$here/lib.sh"

index=$1
node=${NODES[index - 1]}
dir=$SUNK_STATE/nodes/$node
socket=$dir/containerd.sock
mkdir -p "$dir"/{containerd/root,containerd/state,cni,cni-ipam,kubelet,manifests}
subnet=$(node_pod_subnet "$index")
prefix=${subnet%.0/24}

cat >"$dir/cni/10-sunk.conflist" <<CNI
{
  "cniVersion": "1.0.0",
  "name": "sunk",
  "plugins": [{
    "type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
    "ipam": {
      "type": "host-local", "dataDir": "$dir/cni-ipam",
      "ranges": [[{"subnet": "$POD_CIDR", "rangeStart": "$prefix.2", "rangeEnd": "$prefix.254", "gateway": "$BRIDGE_IP"}]],
      "routes": [{"dst": "0.0.0.0/0"}]
    }
  }]
}
CNI

cat >"$dir/containerd.toml" <<TOML
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$socket"
[ttrpc]
  address = "$socket.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # The sandbox may not lower its oom_score_adj on this machine: without this no pod starts.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni"
TOML

# Images come from build-images.sh; nothing can be pulled. Every image (the Slurm ones of the
# cluster's version) is already in the image store up.sh made (image-store.sh): its containerd root,
# hard-linked, but for the databases this containerd writes.
[[ -f $SUNK_IMAGE_STORE/.complete ]] || die "no image store at SUNK_IMAGE_STORE=$SUNK_IMAGE_STORE"
cp -al "$SUNK_IMAGE_STORE/root/." "$dir/containerd/root/"
find "$dir/containerd/root" -name '*.db' -exec sh -c 'cp --remove-destination "$1" "$1.copy" && mv "$1.copy" "$1"' _ {} \;

start "containerd-$node" containerd --config "$dir/containerd.toml"
ctr() { command ctr --address "$socket" --namespace k8s.io "$@"; }
wait_for "containerd of $node" 30 ctr version

# The kubelet's cgroup root, in every hierarchy (cpuset needs its CPUs and memory nodes filled in
# before anything can join it).
for hierarchy in /sys/fs/cgroup/*/; do
  mkdir -p "$hierarchy/sunk-$node"
  if [[ -f $hierarchy/cpuset.cpus ]]; then
    cat "$hierarchy/cpuset.cpus" >"$hierarchy/sunk-$node/cpuset.cpus"
    cat "$hierarchy/cpuset.mems" >"$hierarchy/sunk-$node/cpuset.mems"
  fi
done

# Memory the kubelet offers pods (allocatable): exactly NODE_MEMORY_MIB once this reservation and the
# 100 Mi eviction threshold are taken off. A NodeSet's slurmd declares the Node's allocatable memory
# as RealMemory, so a pod's memory request means the same to the kubelet and to Slurm.
total_kib=$(awk '/^MemTotal:/{print $2}' /proc/meminfo)
reserved_mib=$((total_kib / 1024 - NODE_MEMORY_MIB - 100))
kubeconfig "$dir/kubeconfig" "system:node:$node" "$(token_of "system:node:$node")"
: >"$dir/resolv.conf"
cat >"$dir/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $(node_ip "$index")
port: 10250
readOnlyPort: 0
healthzBindAddress: $(node_ip "$index")
healthzPort: 10248
containerRuntimeEndpoint: unix://$socket
cgroupDriver: cgroupfs
# Several kubelets on one machine: each keeps its pods under a cgroup of its own.
cgroupRoot: /sunk-$node
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
enforceNodeAllocatable: []
localStorageCapacityIsolation: false
systemReserved: {memory: ${reserved_mib}Mi}
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
# The images cannot be pulled again: never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
clusterDNS: [$DNS_SERVICE_IP]
clusterDomain: cluster.local
resolvConf: $dir/resolv.conf
staticPodPath: $dir/manifests
# Several kubelets on one machine: each cleans up only its own pods' logs (a shared /var/log/pods had
# one kubelet delete another's, and kubectl logs failed now and then).
podLogsDir: $dir/pod-logs
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $SUNK_STATE/pki/ca.crt}
authorization: {mode: Webhook}
nodeStatusReportFrequency: 10s
YAML
mkdir -p "$dir/pod-logs"
# A kubelet serves its device-plugin registry at one path whatever its root dir, and empties that
# folder just before it listens there: kubelets starting together can remove and recreate the socket
# under each other, and the one that loses exits ("Failed to start ContainerManager ... address
# already in use"). So they start one at a time, each once it listens there.
registry=/var/lib/kubelet/device-plugins/kubelet.sock
exec {start_lock}>"$SUNK_STATE/kubelet-start.lock"
flock "$start_lock"
start "kubelet-$node" "$SUNK_BIN/kubelet" --config "$dir/kubelet.yaml" --kubeconfig "$dir/kubeconfig" \
  --hostname-override "$node" --node-ip "$(node_ip "$index")" --root-dir "$dir/kubelet" --v 1
kubelet_pid=$(cat "$SUNK_STATE/pids/kubelet-$node.pid")
for _ in $(seq 300); do
  kill -0 "$kubelet_pid" 2>/dev/null || die "kubelet-$node exited; see $SUNK_STATE/logs/kubelet-$node.log"
  ss -Hxlp | grep -F "$registry" | grep -q "pid=$kubelet_pid," && break
  sleep 0.2
done
ss -Hxlp | grep -F "$registry" | grep -q "pid=$kubelet_pid," ||
  die "kubelet-$node does not serve its device-plugin registry after 60s; see $SUNK_STATE/logs/kubelet-$node.log"
flock -u "$start_lock"
