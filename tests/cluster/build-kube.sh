#!/usr/bin/env bash
# Builds kube-apiserver, kubectl and helm of pinned versions from the Go module proxy into
# $SUNK_BIN. Does nothing when the binaries of those versions are already there.
set -euo pipefail
source "$(dirname "$0")/env.sh"
mkdir -p "$SUNK_BIN"

stamp=$SUNK_BIN/.kube-$KUBE_VERSION
if [[ -x $SUNK_BIN/kube-apiserver && -x $SUNK_BIN/kubectl && -f $stamp ]]; then
  log "kube-apiserver and kubectl $KUBE_VERSION: cached"
else
  log "building kube-apiserver and kubectl $KUBE_VERSION (several minutes when cold)"
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
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubectl/pkg/cmd"
)
GO
  GOFLAGS=-mod=mod go mod tidy -e >/dev/null 2>&1 || true
  GOFLAGS=-mod=mod go get "k8s.io/kubernetes@$KUBE_VERSION" >/dev/null
  GOFLAGS=-mod=mod go build -trimpath -ldflags=-s -o "$SUNK_BIN/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl
  touch "$stamp"
fi

helm_stamp=$SUNK_BIN/.helm-$HELM_VERSION
if [[ -x $SUNK_BIN/helm && -f $helm_stamp ]]; then
  log "helm $HELM_VERSION: cached"
else
  log "building helm $HELM_VERSION"
  GOBIN=$SUNK_BIN go install -trimpath -ldflags=-s "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" 2>"$SUNK_CACHE/helm-build.log" \
    || { tail -20 "$SUNK_CACHE/helm-build.log"; die "building helm failed"; }
  touch "$helm_stamp"
fi
