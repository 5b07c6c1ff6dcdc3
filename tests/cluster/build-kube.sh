#!/usr/bin/env bash
# Builds the Kubernetes binaries (control plane, kubelet, kube-proxy, kubectl), CoreDNS and helm of
# pinned versions from the Go module proxy into $SUNK_BIN. Does nothing when the binaries of those
# versions are already there.
set -euo pipefail
source "$(dirname "$0")/env.sh"
mkdir -p "$SUNK_BIN"

kube_binaries=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
stamp=$SUNK_BIN/.kube-$KUBE_VERSION
cached=1
for binary in "${kube_binaries[@]}"; do [[ -x $SUNK_BIN/$binary ]] || cached=; done
if [[ -n $cached && -f $stamp && "$(cat "$stamp")" == "${kube_binaries[*]} version-stamped" ]]; then
  log "Kubernetes $KUBE_VERSION: cached"
else
  log "building ${kube_binaries[*]} $KUBE_VERSION (ten minutes or more when cold)"
  # k8s.io/kubernetes replaces its staging modules with local paths, which `go install` refuses;
  # a wrapper module pins each staging module to its matching v0.Y.Z release instead.
  work=$SUNK_CACHE/kube-build
  rm -rf "$work" && mkdir -p "$work"
  cd "$work"
  gomod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  staging_version=v0.${KUBE_VERSION#v1.}
  {
    echo "module sunk.dev/kube-build"
    echo "go 1.24"
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    grep -E '^\s*k8s.io/[a-z0-9-]+ => ./staging/' "$gomod" | awk -v v="$staging_version" '{print "replace " $1 " => " $1 " " v}'
  } >go.mod
  cat >tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubectl/pkg/cmd"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
  GOFLAGS=-mod=mod go mod tidy -e >/dev/null 2>&1 || true
  GOFLAGS=-mod=mod go get "k8s.io/kubernetes@$KUBE_VERSION" >/dev/null
  packages=()
  for binary in "${kube_binaries[@]}"; do packages+=("k8s.io/kubernetes/cmd/$binary"); done
  # Stamp the version a release build would carry (helm and kubectl read it from /version).
  version_ldflags="-s"
  minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
  for variable in gitVersion="$KUBE_VERSION" gitMajor=1 gitMinor="$minor" gitTreeState=clean; do
    version_ldflags+=" -X k8s.io/component-base/version.$variable -X k8s.io/client-go/pkg/version.$variable"
  done
  GOFLAGS=-mod=mod go build -trimpath -ldflags="$version_ldflags" -o "$SUNK_BIN/" "${packages[@]}"
  echo "${kube_binaries[*]} version-stamped" >"$stamp"
fi

# go_install NAME VERSION PACKAGE: `go install`s PACKAGE@VERSION into $SUNK_BIN unless NAME of that
# version is there already.
go_install() {
  local name=$1 version=$2 package=$3 stamp=$SUNK_BIN/.$1-$2
  if [[ -x $SUNK_BIN/$name && -f $stamp ]]; then
    log "$name $version: cached"
    return
  fi
  log "building $name $version"
  GOBIN=$SUNK_BIN go install -trimpath -ldflags=-s "$package@$version" 2>"$SUNK_CACHE/$name-build.log" \
    || { tail -20 "$SUNK_CACHE/$name-build.log"; die "building $name failed"; }
  touch "$stamp"
}
go_install coredns "$COREDNS_VERSION" github.com/coredns/coredns
go_install helm "$HELM_VERSION" helm.sh/helm/v3/cmd/helm
