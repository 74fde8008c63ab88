#!/usr/bin/env bash
# A local vnest sandbox: a real Kubernetes control plane on loopback (etcd, kube-apiserver,
# controller-manager, scheduler, two KWOK nodes), vnest's CRDs, the operator running against
# it, and examples/quickstart.yaml reconciled to Ready.
#   bash hack/sandbox.sh        start (idempotent) and print how to use it
#   bash hack/sandbox.sh down   stop the operator and the control plane
set -euo pipefail
cd "$(dirname "$0")/.."
state=${VNEST_TESTBED_DIR:-/tmp/vnest-testbed}

if [ "${1:-}" = down ]; then
  if [ -f "$state/pids/sandbox-operator.pid" ]; then kill "$(cat "$state/pids/sandbox-operator.pid")" 2>/dev/null || true; fi
  exec bash tests/testbed/down.sh
fi

for tool in cargo go openssl curl flock; do
  command -v "$tool" >/dev/null || { echo "hack/sandbox.sh: '$tool' is required but not installed" >&2; exit 1; }
done
bash tests/testbed/build.sh >/dev/null
env_file=$(bash tests/testbed/up.sh)
# shellcheck disable=SC1090
source "$env_file"
kubectl() { "$VNEST_TESTBED_BIN/kubectl" --kubeconfig "$VNEST_HOST_KUBECONFIG" "$@"; }

kubectl apply --server-side -f charts/vnest/crds/virtualclusters.yaml
kubectl wait --for=condition=Established crd/virtualclusters.vnest.dev --timeout=60s

cargo build -q -p vnest-operator
pidfile=$state/pids/sandbox-operator.pid
if ! { [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }; then
  kubectl create namespace vnest-system --dry-run=client -o yaml | kubectl apply -f -
  nohup target/debug/vnest-operator --kubeconfig "$VNEST_HOST_KUBECONFIG" \
    --leader-election-namespace vnest-system --metrics-address 127.0.0.1:18080 \
    >"$state/logs/sandbox-operator.log" 2>&1 &
  echo $! >"$pidfile"
fi

kubectl create namespace demo --dry-run=client -o yaml | kubectl apply -f -
# The bed has no storage provisioner: pre-bind a volume to the control plane's data claim.
kubectl apply -f - <<PV
apiVersion: v1
kind: PersistentVolume
metadata: {name: sandbox-demo-data}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  hostPath: {path: /tmp/vnest-sandbox/demo}
  claimRef: {namespace: demo, name: data-demo-0}
PV
kubectl apply --server-side -f examples/quickstart.yaml
kubectl -n demo wait --for=condition=Ready vc/demo --timeout=120s
kubectl get vc -A -o wide
kubectl -n demo get statefulsets,pods,services,secrets,resourcequotas,limitranges,networkpolicies

cat <<USAGE

vnest sandbox is up.
  export KUBECONFIG=$VNEST_HOST_KUBECONFIG
  $VNEST_TESTBED_BIN/kubectl get vc -A -o wide
  operator log:     $state/logs/sandbox-operator.log
  operator metrics: curl -s http://127.0.0.1:18080/metrics | grep vnest_
  stop:             bash hack/sandbox.sh down
USAGE
