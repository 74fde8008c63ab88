#!/usr/bin/env bash
# Builds the programs vnest deploys inside every virtual cluster (today CoreDNS) from the Go module
# proxy, pinned in addons.env. Cached outside the source tree in a folder keyed by the pinned
# versions; a complete folder is reused as is. Prints the bin folder on stdout (progress on stderr).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=addons.env
source "$here/addons.env"

# shellcheck source=build-cache.sh
source "$here/build-cache.sh"
build_folder addons "$here/addons.env" "$here/build-addons.sh"

if [ ! -x "$bin/coredns" ]; then
  log "building coredns $COREDNS_VERSION"
  tmp=$(mktemp -d)
  # CoreDNS's own Makefile sets GitCommit this way; the version is compiled in from its source.
  CGO_ENABLED=0 GOBIN="$tmp" go install -trimpath \
    -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION" \
    "github.com/coredns/coredns@$COREDNS_VERSION"
  mv "$tmp/coredns" "$bin/coredns"
  rm -rf "$tmp"
fi

build_done
