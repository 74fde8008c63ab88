#!/usr/bin/env bash
# Installs the Gateway API CRDs (standard channel) on the bed's host API server, from the Go
# module sigs.k8s.io/gateway-api at GATEWAY_API_VERSION (the Go module cache keeps it offline
# after the first download). Separate from versions.env so the bed's build keys stay as they
# are. Usage: tests/testbed/gateway-api.sh ENV_FILE   (idempotent: server-side apply)
set -euo pipefail

GATEWAY_API_VERSION=v1.6.3

env_file=${1:?usage: gateway-api.sh ENV_FILE}
# shellcheck disable=SC1090
source "$env_file"
dir=$(go mod download -json "sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[[ -d $dir/config/crd/standard ]] || { echo "gateway-api.sh: no CRDs in '$dir'" >&2; exit 1; }
kubectl=("$VNEST_TESTBED_BIN/kubectl" --kubeconfig "$VNEST_HOST_KUBECONFIG")
# Only the CRDs: the channel's ValidatingAdmissionPolicy is not needed by vnest's tests.
for crd in "$dir"/config/crd/standard/gateway.networking.k8s.io_*.yaml; do
    [[ $crd == *_vap_* ]] && continue
    "${kubectl[@]}" apply --server-side --force-conflicts -f "$crd" >/dev/null
done
"${kubectl[@]}" wait --for condition=Established --timeout 60s \
    crd/gateways.gateway.networking.k8s.io crd/httproutes.gateway.networking.k8s.io \
    crd/grpcroutes.gateway.networking.k8s.io crd/tlsroutes.gateway.networking.k8s.io \
    crd/gatewayclasses.gateway.networking.k8s.io >/dev/null
echo "$GATEWAY_API_VERSION"
