#!/usr/bin/env bash
# Runs the Kubernetes conformance specs — e2e.test, built from the Go module proxy by
# tests/testbed/build-e2e.sh — against a vnest virtual cluster on the bed's real node, as its
# tenant (the kubeconfig from Secret vc-<name>, through the virtual cluster's Service), and, for
# the baseline, against the bed's host cluster itself. A client no one here wrote.
#
#   bash hack/conformance.sh [--focus REGEX] [--skip REGEX] [--nodes N] [--target virtual|host|both]
#                            [--out DIR] [--timeout DURATION] [--name NAME] [--clean]
#
# --name names the virtual cluster (default conformance, in namespace vnest-<name>): runs with
# other names can share the bed.
# --clean removes the virtual cluster, its namespace and volume and stops the operator on exit.
# With VNEST_TESTBED_ENV naming a running bed's env file (as in the test suite), the bed, the
# workspace's binaries and their images are taken as they are.
#
# Defaults: focus '\[Conformance\]', skip '\[Serial\]|\[Disruptive\]', 4 parallel ginkgo processes,
# target virtual, out /tmp/vnest-conformance. Writes <out>/<target>/junit_01.xml, the ginkgo log
# <out>/<target>/e2e.log and <out>/summary.md (passed / failed / skipped by SIG); exits 0 when the
# run finished, whatever it found.
#
# Placement: the bed's real node is tainted so that only pods asking for it go there. The virtual
# cluster sends every pod there with sync.toHost.pods.enforceTolerations and the node selector of
# sync.fromHost.nodes; the tenant sees that node untainted. The host baseline cannot place the
# pods e2e.test makes, so for its duration the KWOK nodes are cordoned and the real node's taint
# is lifted (both restored on exit): run it on an idle bed.
#
# Images: nothing is pulled. Specs run agnhost, built from k8s.io/kubernetes here and imported
# under the reference the e2e framework asks for; a spec needing another image (busybox, nginx,
# httpd, ...) fails on ErrImageNeverPull in both targets alike.
set -euo pipefail
cd "$(dirname "$0")/.."

focus='\[Conformance\]'
skip='\[Serial\]|\[Disruptive\]'
nodes=4
target=virtual
out=/tmp/vnest-conformance
timeout=3h
clean=0
vc=conformance
while [ $# -gt 0 ]; do
  case $1 in
    --focus) focus=$2; shift 2 ;;
    --skip) skip=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --target) target=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --clean) clean=1; shift ;;
    --name) vc=$2; shift 2 ;;
    -h | --help) sed -n '2,30p' "$0" >&2; exit 0 ;;
    *) echo "hack/conformance.sh: unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
case $target in virtual | host | both) ;; *) echo "hack/conformance.sh: --target must be virtual, host or both" >&2; exit 2 ;; esac

state=${VNEST_TESTBED_DIR:-/tmp/vnest-testbed}
e2e=$(bash tests/testbed/build-e2e.sh)
if [ -n "${VNEST_TESTBED_ENV:-}" ] && [ -f "$VNEST_TESTBED_ENV" ]; then
  env_file=$VNEST_TESTBED_ENV
else
  for script in build.sh build-node.sh build-addons.sh build-lua-health.sh; do
    bash "tests/testbed/$script" >/dev/null
  done
  env_file=$(bash tests/testbed/up.sh)
  cargo build -q --locked -p vnest-operator -p vnest-syncer
  bash tests/testbed/images.sh
fi
# shellcheck disable=SC1090
source "$env_file"
kubectl() { "$VNEST_TESTBED_BIN/kubectl" --kubeconfig "$VNEST_HOST_KUBECONFIG" "$@"; }
label=$VNEST_TESTBED_NODE_LABEL
bash tests/testbed/images.sh e2e
mkdir -p "$out"

# The operator, watching only the conformance namespace (tests on the same bed run their own),
# with a Lease of its own, and the host's Service range as the virtual API server's (so virtual
# Services keep the addresses it gives them).
kubectl apply --server-side --force-conflicts -f charts/vnest/crds/virtualclusters.yaml >/dev/null
kubectl wait --for=condition=Established crd/virtualclusters.vnest.dev --timeout=60s >/dev/null
ns=vnest-$vc
kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
pidfile=$state/pids/$ns-operator.pid
if ! { [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }; then
  nohup target/debug/vnest-operator --kubeconfig "$VNEST_HOST_KUBECONFIG" \
    --namespace "$ns" --leader-election-namespace "$ns" --metrics-address 127.0.0.1:0 \
    --service-cidr "$(kubectl get servicecidr kubernetes -o jsonpath='{.spec.cidrs[0]}')" \
    >"$state/logs/$ns-operator.log" 2>&1 &
  echo $! >"$pidfile"
fi
cleanup() {
  kubectl -n "$ns" delete vc "$vc" --ignore-not-found --wait=true --timeout=120s >/dev/null 2>&1 || true
  kill "$(cat "$pidfile")" 2>/dev/null || true
  rm -f "$pidfile"
  kubectl delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  kubectl delete pv "$ns-data" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  rm -rf "${state:?}/volumes/$ns"
}
if [ "$clean" = 1 ]; then trap cleanup EXIT; fi

# Runs e2e.test through ginkgo against KUBECONFIG into <out>/<name>.
run_e2e() { # name kubeconfig
  local name=$1 kc=$2 dir=$out/$1 started
  rm -rf "$dir" && mkdir -p "$dir"
  started=$(date +%s)
  echo "conformance: running '$focus' (skip '$skip') against the $name cluster, $nodes processes; log $dir/e2e.log" >&2
  "$e2e/ginkgo" --procs="$nodes" --timeout="$timeout" --no-color --output-dir="$dir" \
    --junit-report=junit_01.xml --focus="$focus" --skip="$skip" "$e2e/e2e.test" -- \
    --kubeconfig="$kc" --provider=skeleton --report-dir="$dir" \
    --kubectl-path="$VNEST_TESTBED_BIN/kubectl" \
    --non-blocking-taints="$label,node-role.kubernetes.io/control-plane" \
    --minStartupPods=0 --e2e-verify-service-account=true --dump-logs-on-failure=false \
    >"$dir/e2e.log" 2>&1 || true
  echo $(($(date +%s) - started)) >"$dir/seconds"
}

virtual_cluster() {
  local volume=$state/volumes/$ns/data-$vc-0
  mkdir -p "$volume" && chown 65532:65532 "$volume"
  kubectl apply -f - >/dev/null <<PV
apiVersion: v1
kind: PersistentVolume
metadata: {name: $ns-data}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  hostPath: {path: $volume, type: Directory}
  claimRef: {namespace: $ns, name: data-$vc-0}
PV
  kubectl apply --server-side -f - >/dev/null <<VC
apiVersion: vnest.dev/v1alpha1
kind: VirtualCluster
metadata: {name: $vc, namespace: $ns}
spec:
  controlPlane:
    distro: {k8s: {enabled: true}}
    statefulSet:
      scheduling:
        nodeSelector: {$label: real}
        tolerations: [{key: $label, operator: Exists, effect: NoSchedule}]
  sync:
    toHost:
      pods:
        enforceTolerations: [{key: $label, operator: Exists, effect: NoSchedule}]
    fromHost:
      nodes: {enabled: true, selector: {labels: {$label: real}}}
  policies:
    podSecurityStandard: privileged
VC
  kubectl -n "$ns" wait --for=condition=Ready "vc/$vc" --timeout=300s >/dev/null
  # The tenant's kubeconfig, pointed at the Service's ClusterIP (kube-proxy on this machine
  # leads there) while verifying the certificate against the Service's DNS name.
  local kc=$out/virtual.kubeconfig ip cluster
  kubectl -n "$ns" get secret "vc-$vc" -o jsonpath='{.data.config}' | base64 -d >"$kc"
  ip=$(kubectl -n "$ns" get service "$vc" -o jsonpath='{.spec.clusterIP}')
  cluster=$("$VNEST_TESTBED_BIN/kubectl" --kubeconfig "$kc" config view -o jsonpath='{.clusters[0].name}')
  "$VNEST_TESTBED_BIN/kubectl" --kubeconfig "$kc" config set-cluster "$cluster" \
    --server="https://$ip:443" --tls-server-name="$vc.$ns.svc" >/dev/null
  for _ in $(seq 1 100); do
    "$VNEST_TESTBED_BIN/kubectl" --kubeconfig "$kc" get --raw /readyz >/dev/null 2>&1 && break
    sleep 1
  done
  run_e2e virtual "$kc"
}

host_cluster() {
  local kwok
  kwok=$(kubectl get nodes -l type=kwok -o name)
  restore() {
    # shellcheck disable=SC2086
    kubectl uncordon $kwok >/dev/null 2>&1 || true
    kubectl taint --overwrite node "$VNEST_TESTBED_NODE" "$label=real:NoSchedule" >/dev/null 2>&1 || true
  }
  trap 'restore; [ "$clean" = 0 ] || cleanup' EXIT
  # shellcheck disable=SC2086
  kubectl cordon $kwok >/dev/null
  kubectl taint node "$VNEST_TESTBED_NODE" "$label-" >/dev/null 2>&1 || true
  run_e2e host "$VNEST_HOST_KUBECONFIG"
  restore
  if [ "$clean" = 1 ]; then trap cleanup EXIT; else trap - EXIT; fi
}

case $target in
  virtual) virtual_cluster ;;
  host) host_cluster ;;
  both) host_cluster; virtual_cluster ;;
esac
if command -v python3 >/dev/null; then
  python3 hack/conformance_summary.py "$out" >"$out/summary.md"
  cat "$out/summary.md"
else
  echo "conformance: no python3 for the summary; the JUnit reports are in $out" >&2
fi
