#!/usr/bin/env bash
# Builds the test-bed binaries from the Go module proxy into a cache folder outside the
# source tree, keyed by every pinned version; a complete cache folder is reused as is.
# Prints the bin folder on stdout (progress goes to stderr).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

# shellcheck source=build-cache.sh
source "$here/build-cache.sh"
build_folder bin "$here/versions.env" "$here/go/go.mod" "$here/go/go.sum" "$here/build.sh"

# Without these -X values the binaries report v0.0.0-master, which breaks version checks
# (helm's kubeVersion, kubectl's skew warning). Names as in kubernetes' hack/lib/version.sh.
k8s_version_flags() {
  local v=$KUBERNETES_VERSION minor
  minor=$(echo "$v" | cut -d. -f2)
  local pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    printf -- '-X %s.gitVersion=%s -X %s.gitMajor=1 -X %s.gitMinor=%s -X %s.gitTreeState=clean -X %s.buildDate=1970-01-01T00:00:00Z ' \
      "$pkg" "$v" "$pkg" "$pkg" "$minor" "$pkg" "$pkg"
  done
}

(
  cd "$here/go"
  for tool in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    if [ ! -x "$bin/$tool" ]; then
      log "building $tool $KUBERNETES_VERSION"
      go build -trimpath -ldflags "-s -w $(k8s_version_flags)" -o "$bin/$tool" "k8s.io/kubernetes/cmd/$tool"
    fi
  done
  if [ ! -x "$bin/etcd" ]; then
    log "building etcd $ETCD_VERSION"
    go build -trimpath -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3
  fi
  if [ ! -x "$bin/sample-apiserver" ]; then
    log "building sample-apiserver (k8s.io/sample-apiserver ${KUBERNETES_VERSION/v1/v0})"
    go build -trimpath -ldflags "-s -w $(k8s_version_flags)" -o "$bin/sample-apiserver" k8s.io/sample-apiserver
  fi
)

if [ ! -x "$bin/kwok" ]; then
  log "building kwok $KWOK_VERSION"
  GOBIN="$bin" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
fi
if [ ! -x "$bin/helm" ]; then
  log "building helm $HELM_VERSION"
  GOBIN="$bin" go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$(echo "$KUBERNETES_VERSION" | cut -d. -f2) -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$(echo "$KUBERNETES_VERSION" | cut -d. -f2)" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
fi

build_done
