# The `k8s` distro's image: kube-apiserver, kube-controller-manager and kine (the SQLite-backed
# etcd shim, the default backing store) side by side, so one image reference moves the whole
# control plane. Built from the test bed's pinned modules (context: the repository root):
#   docker build -f images/kubernetes.Dockerfile -t ghcr.io/vnest-dev/kubernetes:v1.37.2 .
# tag: v1.37.2
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY tests/testbed/ tests/testbed/
# Version flags as tests/testbed/build.sh sets them (without them the binaries say v0.0.0-master).
RUN . tests/testbed/versions.env && . tests/testbed/node/versions.env && \
    minor=$(echo "$KUBERNETES_VERSION" | cut -d. -f2) && \
    flags="" && for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do \
      flags="$flags -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"; \
    done && \
    cd tests/testbed/go && \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $flags" -o /out/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver && \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $flags" -o /out/kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager && \
    CGO_ENABLED=0 GOBIN=/out go install -trimpath -ldflags "-s -w" "github.com/k3s-io/kine@$KINE_VERSION"

# Static binaries: no libc needed; no shell, non-root.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/kube-apiserver /usr/local/bin/kube-apiserver
COPY --from=build /out/kube-controller-manager /usr/local/bin/kube-controller-manager
COPY --from=build /out/kine /usr/local/bin/kine
USER 65532:65532
