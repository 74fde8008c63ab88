#!/usr/bin/env bash
# Runs every vnest test: formatting, lints, unit tests, and the integration tests against a
# real local Kubernetes test bed and its real node (built from the Go module proxy on first use,
# cached in ~/.cache/vnest-testbed). The bed is started here and torn down when this script
# exits.
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in cargo go openssl curl flock iptables socat conntrack gcc pkg-config objcopy; do
  command -v "$tool" >/dev/null || { echo "hack/test.sh: '$tool' is required but not installed (bash .ci/run installs it)" >&2; exit 1; }
done

echo "== test bed binaries" >&2
bash tests/testbed/build.sh >/dev/null
bash tests/testbed/build-node.sh >/dev/null
bash tests/testbed/build-addons.sh >/dev/null
bash tests/testbed/build-lua-health.sh >/dev/null
bash tests/testbed/build-e2e.sh >/dev/null
echo "== test bed" >&2
env_file=$(bash tests/testbed/up.sh --owner-pid $$)
export VNEST_TESTBED_ENV=$env_file

echo "== fmt + clippy" >&2
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== build binaries used by the integration tests" >&2
cargo build --workspace --bins --locked
echo "== images of the workspace's binaries, for the real node" >&2
bash tests/testbed/images.sh
echo "== tests" >&2
cargo test --workspace --locked
