#!/usr/bin/env bash
# Builds the Kubernetes binaries (control plane, kubelet, kube-proxy, kubectl), CoreDNS and helm of
# pinned versions from the Go module proxy into $SUNK_BIN, in one Go build, so that the Kubernetes
# libraries all three use are compiled once. $SUNK_BIN is the machine cache's entry keyed by those
# versions and this recipe (env.sh); when it is complete, nothing is built. .cache/bin links to it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
mkdir -p "$SUNK_CACHE"
link_bin() { ln -sfn "$SUNK_BIN" "$SUNK_CACHE/bin.new" && mv -T "$SUNK_CACHE/bin.new" "$SUNK_CACHE/bin"; }

kube_binaries=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
binaries=("${kube_binaries[@]}" coredns helm)
if [[ -f $SUNK_BIN/.complete ]]; then
  log "Kubernetes $KUBE_VERSION, CoreDNS $COREDNS_VERSION, helm $HELM_VERSION: cached in $SUNK_BIN"
  link_bin
  exit 0
fi
partial=$SUNK_BIN.partial
rm -rf "$partial" && mkdir -p "$partial"

log "building ${binaries[*]} (ten minutes or more when cold)"
# k8s.io/kubernetes replaces its staging modules with local paths, which `go install` refuses; a
# wrapper module pins each staging module to its matching v0.Y.Z release instead. CoreDNS and helm
# are built in the same module, so they link the same Kubernetes libraries (CoreDNS's version is the
# newest built against this Kubernetes minor).
work=$SUNK_MACHINE_CACHE/kube-build
rm -rf "$work" && mkdir -p "$work/coredns"
cd "$work"
gomod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
staging_version=v0.${KUBE_VERSION#v1.}
{
  echo "module sunk.dev/cluster-tools"
  echo "go 1.24"
  echo "require k8s.io/kubernetes $KUBE_VERSION"
  grep -E '^\s*k8s.io/[a-z0-9-]+ => ./staging/' "$gomod" | awk -v v="$staging_version" '{print "replace " $1 " => " $1 " " v}'
} >go.mod
cat >tools.go <<'GO'
//go:build tools

package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
	_ "k8s.io/kubectl/pkg/cmd"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
cp "$here/coredns/main.go" coredns/main.go
GOFLAGS=-mod=mod go mod tidy -e >/dev/null 2>&1 || true
GOFLAGS=-mod=mod go get "k8s.io/kubernetes@$KUBE_VERSION" "github.com/coredns/coredns@$COREDNS_VERSION" \
  "helm.sh/helm/v3@$HELM_VERSION" >/dev/null 2>"$SUNK_CACHE/cluster-tools-build.log" \
  || { tail -20 "$SUNK_CACHE/cluster-tools-build.log"; die "resolving the modules failed"; }
packages=(helm.sh/helm/v3/cmd/helm ./coredns)
for binary in "${kube_binaries[@]}"; do packages+=("k8s.io/kubernetes/cmd/$binary"); done
# Stamp the version a release build would carry (helm and kubectl read it from /version).
version_ldflags="-s"
minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
for variable in gitVersion="$KUBE_VERSION" gitMajor=1 gitMinor="$minor" gitTreeState=clean; do
  version_ldflags+=" -X k8s.io/component-base/version.$variable -X k8s.io/client-go/pkg/version.$variable"
done
GOFLAGS=-mod=mod go build -trimpath -ldflags="$version_ldflags" -o "$partial/" "${packages[@]}" \
  2>>"$SUNK_CACHE/cluster-tools-build.log" || { tail -20 "$SUNK_CACHE/cluster-tools-build.log"; die "building failed"; }
for binary in "${binaries[@]}"; do [[ -x $partial/$binary ]] || die "the build made no $binary"; done
touch "$partial/.complete"
# Entries of older recipes or versions go: nothing else uses them.
find "$SUNK_MACHINE_CACHE/kube-tools" -mindepth 1 -maxdepth 1 ! -name "${partial##*/}" -exec rm -rf {} +
mv -T "$partial" "$SUNK_BIN"
rm -rf "$work"
link_bin
