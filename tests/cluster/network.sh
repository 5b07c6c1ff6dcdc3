#!/usr/bin/env bash
# The local cluster's network: `network.sh up` makes the bridge every pod hangs off, gives it the
# control plane's and the Nodes' addresses, and fences it in (nothing forwarded or masqueraded in or
# out of the machine); `network.sh down` undoes all of it. Both are idempotent.
set -euo pipefail
source "$(dirname "$0")/env.sh"

CHAIN=SUNK-FORWARD

down() {
  # Our fence, and every chain and rule kube-proxy and the kubelets made (all named KUBE-*): drop
  # those lines from the tables and load the rest back, leaving anyone else's rules as they were.
  local tables
  for tool in iptables ip6tables; do
    tables=$("$tool-save")
    if grep -q -e KUBE- -e "$CHAIN" <<<"$tables"; then
      grep -v -e KUBE- -e "$CHAIN" <<<"$tables" | "$tool-restore"
    fi
  done
  # Pods' veths go with their network namespaces; the bridge is ours.
  ip link del "$BRIDGE" 2>/dev/null || true
  if [[ -f $SUNK_CACHE/ip_forward.saved ]]; then
    cat "$SUNK_CACHE/ip_forward.saved" >/proc/sys/net/ipv4/ip_forward
    rm -f "$SUNK_CACHE/ip_forward.saved"
  fi
}

up() {
  down
  ip link add "$BRIDGE" type bridge
  ip addr add "$BRIDGE_IP/16" dev "$BRIDGE"
  for i in "${!NODES[@]}"; do ip addr add "$(node_ip $((i + 1)))/32" dev "$BRIDGE"; done
  ip link set "$BRIDGE" up
  # Services reach pods on the same bridge through kube-proxy's NAT only if bridged traffic passes
  # iptables; pod -> service -> pod on the same bridge is routed, so forwarding is needed too.
  echo 1 >/proc/sys/net/bridge/bridge-nf-call-iptables
  [[ -f $SUNK_CACHE/ip_forward.saved ]] || cat /proc/sys/net/ipv4/ip_forward >"$SUNK_CACHE/ip_forward.saved"
  echo 1 >/proc/sys/net/ipv4/ip_forward
  # Forwarding stays on the bridge: nothing from a pod leaves the machine, nothing from outside
  # reaches a pod.
  iptables -N "$CHAIN"
  iptables -A "$CHAIN" -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT
  iptables -A "$CHAIN" -i "$BRIDGE" -j DROP
  iptables -A "$CHAIN" -o "$BRIDGE" -j DROP
  iptables -I FORWARD 1 -j "$CHAIN"
}

mkdir -p "$SUNK_CACHE"
case ${1:-} in
  up) up ;;
  down) down ;;
  *) die "usage: network.sh up|down" ;;
esac
