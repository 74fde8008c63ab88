#!/usr/bin/env bash
# Builds the real node of the test bed from the Go module proxy: kubelet and kube-proxy (the
# control plane's Kubernetes version, node/go.mod), containerd v2, runc (with seccomp), the CNI
# plugins, kine, and the bed's own small programs (pause, the tenant workload). Cached outside
# the source tree in a folder keyed by every pinned version; a complete folder is reused as is.
# Prints the bin folder on stdout (progress goes to stderr).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
# shellcheck source=node/versions.env
source "$here/node/versions.env"

# shellcheck source=build-cache.sh
source "$here/build-cache.sh"
build_folder node "$here/versions.env" "$here/node/versions.env" "$here/node/go.mod" "$here/node/go.sum" \
  "$here/build-node.sh" "$here"/workload/go.mod "$here"/workload/*/*.go

# runc needs cgo and libseccomp: without the seccomp tag every container fails with
# "seccomp config provided but seccomp not supported".
for need in gcc pkg-config; do
  command -v "$need" >/dev/null || { echo "build-node.sh: '$need' is required (apt-get install gcc pkg-config)" >&2; exit 1; }
done
pkg-config --exists libseccomp || { echo "build-node.sh: libseccomp-dev is required (apt-get install libseccomp-dev)" >&2; exit 1; }

k8s_version_flags() {
  local v=$KUBERNETES_VERSION minor pkg
  minor=$(echo "$v" | cut -d. -f2)
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    printf -- '-X %s.gitVersion=%s -X %s.gitMajor=1 -X %s.gitMinor=%s -X %s.gitTreeState=clean -X %s.buildDate=1970-01-01T00:00:00Z ' \
      "$pkg" "$v" "$pkg" "$pkg" "$minor" "$pkg" "$pkg"
  done
}

install_tool() { # output-name package@version [extra go flags...]
  local out=$1 pkg=$2; shift 2
  [ -x "$bin/$out" ] && return 0
  log "building $out ($pkg)"
  local tmp
  tmp=$(mktemp -d)
  GOBIN="$tmp" go install -trimpath "$@" "$pkg"
  mv "$tmp"/* "$bin/$out"
  rm -rf "$tmp"
}
for c in containerd containerd-shim-runc-v2 ctr; do
  CGO_ENABLED=0 install_tool "$c" "github.com/containerd/containerd/v2/cmd/$c@$CONTAINERD_VERSION" -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION"
done
CGO_ENABLED=1 install_tool runc "github.com/opencontainers/runc@$RUNC_VERSION" -tags seccomp -ldflags "-s -w -X main.version=${RUNC_VERSION#v}"
mkdir -p "$bin/cni"
for p in main/bridge main/loopback ipam/host-local meta/portmap; do
  CGO_ENABLED=0 install_tool "cni/${p#*/}" "github.com/containernetworking/plugins/plugins/$p@$CNI_PLUGINS_VERSION" -ldflags "-s -w"
done
CGO_ENABLED=0 install_tool kine "github.com/k3s-io/kine@$KINE_VERSION" -ldflags "-s -w -X github.com/k3s-io/kine/pkg/version.Version=$KINE_VERSION"
# Builds $bin/<name> from a package of the Go module in <dir> (its go.mod pins the versions),
# unless it is there already.
build_in_module() { # dir output-name package what [extra ldflags]
  local dir=$1 out=$2 pkg=$3 what=$4 ldflags=${5:-}
  [ -x "$bin/$out" ] && return 0
  log "building $out $what"
  (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w${ldflags:+ $ldflags}" -o "$bin/$out" "$pkg")
}
for p in pause vnest-echo; do
  build_in_module "$here/workload" "$p" "./$p" "(tests/testbed/workload)"
done
for tool in kubelet kube-proxy; do
  build_in_module "$here/node" "$tool" "k8s.io/kubernetes/cmd/$tool" "$KUBERNETES_VERSION" "$(k8s_version_flags)"
done

build_done
