#!/usr/bin/env bash
# Builds lua-health (Argo CD's Lua engine, gopher-lua, running a resource health script) into
# ~/.cache/vnest-testbed/lua-health-<key>/ and prints the binary's path. Separate from
# build.sh so that changing it never invalidates the Kubernetes build.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export GOTOOLCHAIN=local GOFLAGS=-modcacherw
cache_root=${VNEST_TESTBED_CACHE:-$HOME/.cache/vnest-testbed}
key=$(cat "$here/lua-health/go.mod" "$here/lua-health/go.sum" "$here/lua-health/main.go" "$0" | sha256sum | cut -c1-16)
out="$cache_root/lua-health-$key/lua-health"
if [ ! -x "$out" ]; then
  echo "[testbed build] building lua-health (github.com/yuin/gopher-lua)" >&2
  mkdir -p "$(dirname "$out")"
  (cd "$here/lua-health" && go build -trimpath -ldflags "-s -w" -o "$out.tmp" .)
  mv "$out.tmp" "$out"
fi
echo "$out"
