#!/usr/bin/env bash
# Builds the Kubernetes end-to-end test binary (e2e.test, which holds the [Conformance] specs),
# the ginkgo runner and agnhost, the image binary most of those specs run, from the Go module proxy at the bed's
# Kubernetes version (module e2e/). Cached outside the source tree in a folder keyed by the
# pinned versions; a complete folder is reused as is. Prints the bin folder on stdout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

# shellcheck source=build-cache.sh
source "$here/build-cache.sh"
build_folder e2e "$here/versions.env" "$here/e2e/go.mod" "$here/e2e/go.sum" "$here/build-e2e.sh" \
  "$here"/dnstools/go.{mod,sum} "$here"/dnstools/*/main.go
# The commands of the busybox stand-in the conformance specs run (their shell scripts call these).
UROOT_VERSION=v0.16.0
BUSYBOX_COMMANDS="gosh cat ls sleep true false echo id printenv grep head tail wc wget hostname mkdir
  touch rm cp mv ln chmod date uname seq sort tr tee readlink ps kill timeout md5sum base64 dd find
  xargs netcat df du mount uniq basename dirname pwd mktemp hexdump"

# The same -X values as build.sh: the e2e framework compares its own version with the server's.
minor=$(echo "$KUBERNETES_VERSION" | cut -d. -f2)
flags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  flags+="-X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor "
  flags+="-X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z "
done

(
  cd "$here/e2e"
  if [ ! -x "$bin/e2e.test" ]; then
    log "building e2e.test $KUBERNETES_VERSION"
    go test -c -trimpath -ldflags "-s -w $flags" -o "$bin/e2e.test" k8s.io/kubernetes/test/e2e
  fi
  if [ ! -x "$bin/agnhost" ]; then
    log "building agnhost (k8s.io/kubernetes/test/images/agnhost $KUBERNETES_VERSION)"
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin/agnhost" k8s.io/kubernetes/test/images/agnhost
  fi
  if [ ! -x "$bin/ginkgo" ]; then
    log "building the ginkgo runner (runs e2e.test's specs in parallel processes)"
    go build -trimpath -ldflags "-s -w" -o "$bin/ginkgo" github.com/onsi/ginkgo/v2/ginkgo
  fi
  if [ ! -d "$bin/busybox" ]; then
    # busybox itself is C; its stand-in is u-root's Go commands, gosh (mvdan.cc/sh) as sh.
    log "building the busybox stand-in (u-root $UROOT_VERSION)"
    rm -rf "$bin/busybox.tmp"
    packages=()
    for command in $BUSYBOX_COMMANDS; do
      packages+=("github.com/u-root/u-root/cmds/core/$command@$UROOT_VERSION")
    done
    CGO_ENABLED=0 GOBIN="$bin/busybox.tmp" go install -trimpath -ldflags "-s -w" "${packages[@]}"
    mv "$bin/busybox.tmp/gosh" "$bin/busybox.tmp/sh"
    mv "$bin/busybox.tmp/netcat" "$bin/busybox.tmp/nc"
    cp "$bin/busybox.tmp/printenv" "$bin/busybox.tmp/env"
    mv "$bin/busybox.tmp" "$bin/busybox"
  fi
  # The agnhost image tag the e2e framework asks for (test/utils/image/manifest.go), and the
  # certificate its image carries (specs probe for /localhost.crt).
  go_mod_dir=$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)
  cp "$go_mod_dir/test/images/agnhost/VERSION" "$bin/agnhost.version"
  cp "$go_mod_dir"/test/images/agnhost/porter/localhost.{crt,key} "$bin/"
  chmod u+w "$bin/agnhost.version" "$bin"/localhost.{crt,key}
)

# dig and getent for the DNS specs' probe pods (dnstools/: the agnhost and glibc-dns-testing
# images carry BIND's dig and a libc's getent, which cannot be built here).
(
  cd "$here/dnstools"
  if [ ! -d "$bin/dnstools" ]; then
    log "building the dig and getent stand-ins (tests/testbed/dnstools)"
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin/dnstools.tmp/" ./dig ./getent
    mv "$bin/dnstools.tmp" "$bin/dnstools"
  fi
)

build_done
