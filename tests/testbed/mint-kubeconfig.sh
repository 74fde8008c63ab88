#!/usr/bin/env bash
# Prints (stdout) a kubeconfig that authenticates as a ServiceAccount with a 1h token from
# `kubectl create token`, against the host API server (default) or the virtual one.
#   mint-kubeconfig.sh NAMESPACE SERVICEACCOUNT [--virtual]
# The bed must be up (up.sh); the ServiceAccount must exist.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

usage() { echo "usage: $0 NAMESPACE SERVICEACCOUNT [--virtual]" >&2; exit 2; }
target=host
args=()
for a in "$@"; do
  case $a in
    --virtual) target=virtual ;;
    --host) target=host ;;
    -h | --help) usage ;;
    -*) echo "mint-kubeconfig.sh: unknown option $a" >&2; usage ;;
    *) args+=("$a") ;;
  esac
done
[ ${#args[@]} -eq 2 ] || usage
ns=${args[0]} sa=${args[1]}

if [ ! -f "$ENV_FILE" ]; then
  echo "mint-kubeconfig.sh: test bed is not up ($ENV_FILE missing); run up.sh first" >&2
  exit 1
fi
VNEST_TESTBED_BIN="" VNEST_HOST_KUBECONFIG="" VNEST_VIRTUAL_KUBECONFIG="" VNEST_HOST_SERVER="" VNEST_VIRTUAL_SERVER="" VNEST_TESTBED_CA=""
while IFS='=' read -r k v; do
  case $k in VNEST_*) printf -v "$k" '%s' "$v" ;; esac
done <"$ENV_FILE"

if [ "$target" = virtual ]; then
  admin=$VNEST_VIRTUAL_KUBECONFIG server=$VNEST_VIRTUAL_SERVER
else
  admin=$VNEST_HOST_KUBECONFIG server=$VNEST_HOST_SERVER
fi
token=$("$VNEST_TESTBED_BIN/kubectl" --cache-dir="$STATE/kube-cache" --kubeconfig="$admin" \
  create token "$sa" --namespace="$ns" --duration=1h)
name="vnest-$target"
cat <<EOF
apiVersion: v1
kind: Config
clusters:
- name: $name
  cluster:
    server: $server
    certificate-authority-data: $(base64 -w0 <"$VNEST_TESTBED_CA")
users:
- name: $ns-$sa
  user:
    token: $token
contexts:
- name: $name-$ns-$sa
  context:
    cluster: $name
    user: $ns-$sa
    namespace: $ns
current-context: $name-$ns-$sa
EOF
