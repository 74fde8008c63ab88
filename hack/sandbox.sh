#!/usr/bin/env bash
# A local vnest sandbox: a real Kubernetes control plane on loopback (etcd, kube-apiserver,
# controller-manager, scheduler, two KWOK nodes and a real node: containerd, runc, kubelet,
# kube-proxy), vnest's CRDs, the operator running against it, examples/quickstart.yaml
# reconciled to Ready, `kubectl vnest connect --port-forward` to its API proxy, and a tenant pod
# created through the tenant kubeconfig `vc-demo`, running on the host.
#
# Real path (Linux, root, the kernel features the bed's node needs): the control-plane pod the
# operator writes runs for real on the real node (distro k8s: kube-apiserver, controller-manager,
# kine, the syncer), and the tenant pod is a real container whose log is printed.
# Fallback (the machine cannot run the node; the reason is printed): the control-plane pod sits
# on a KWOK node, the bed's second API server stands in for it and the syncer runs as a local
# process wired as the pod would run it.
#   bash hack/sandbox.sh        start (idempotent) and print how to use it
#   bash hack/sandbox.sh down   stop the operator and the control plane
set -euo pipefail
cd "$(dirname "$0")/.."
state=${VNEST_TESTBED_DIR:-/tmp/vnest-testbed}

if [ "${1:-}" = down ]; then
  for part in connect operator syncer; do
    if [ -f "$state/pids/sandbox-$part.pid" ]; then kill "$(cat "$state/pids/sandbox-$part.pid")" 2>/dev/null || true; fi
  done
  exec bash tests/testbed/down.sh
fi

for tool in cargo go openssl curl flock; do
  command -v "$tool" >/dev/null || { echo "hack/sandbox.sh: '$tool' is required but not installed" >&2; exit 1; }
done
bash tests/testbed/build.sh >/dev/null
env_file=$(VNEST_TESTBED_NODE=optional bash tests/testbed/up.sh)
# shellcheck disable=SC1090
source "$env_file"
kubectl() { "$VNEST_TESTBED_BIN/kubectl" --kubeconfig "$VNEST_HOST_KUBECONFIG" "$@"; }

kubectl apply --server-side --force-conflicts -f charts/vnest/crds/virtualclusters.yaml
kubectl wait --for=condition=Established crd/virtualclusters.vnest.dev crd/virtualclustertemplates.vnest.dev --timeout=60s

case $VNEST_TESTBED_NODE in
  absent*) real=0; echo "sandbox: no real node on this machine (${VNEST_TESTBED_NODE#absent: }); falling back to the KWOK path" >&2 ;;
  *) real=1 ;;
esac

cargo build -q -p vnest-operator -p vnest-syncer -p kubectl-vnest
pidfile=$state/pids/sandbox-operator.pid
if ! { [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }; then
  kubectl create namespace vnest-system --dry-run=client -o yaml | kubectl apply -f -
  nohup target/debug/vnest-operator --kubeconfig "$VNEST_HOST_KUBECONFIG" \
    --leader-election-namespace vnest-system --metrics-address 127.0.0.1:18080 \
    --service-cidr "$(kubectl get servicecidr kubernetes -o jsonpath='{.spec.cidrs[0]}')" \
    >"$state/logs/sandbox-operator.log" 2>&1 &
  echo $! >"$pidfile"
fi

# The control plane's data volume: a PersistentVolume at hostPath $1, pre-bound to its claim.
data_volume() {
  kubectl apply -f - <<PV
apiVersion: v1
kind: PersistentVolume
metadata: {name: sandbox-demo-data}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  hostPath: $1
  claimRef: {namespace: demo, name: data-demo-0}
PV
}

kubectl create namespace demo --dry-run=client -o yaml | kubectl apply -f -
if [ "$real" = 1 ]; then
  bash tests/testbed/images.sh
  # The bed has no storage provisioner: a folder the images' user (65532) owns, pre-bound to
  # the control plane's data claim (kine's SQLite lives there).
  volume=$state/volumes/demo/data-demo-0
  mkdir -p "$volume" && chown 65532:65532 "$volume"
  data_volume "{path: $volume, type: Directory}"
  # quickstart.yaml ends with its spec: add the distro the bed can run and place the pod on the
  # real node (tainted so that only pods asking for it go there).
  { cat examples/quickstart.yaml; cat <<SPEC; } | kubectl apply --server-side -f -
  controlPlane:
    distro: {k8s: {enabled: true}}
    statefulSet:
      scheduling:
        nodeSelector: {$VNEST_TESTBED_NODE_LABEL: real}
        tolerations: [{key: $VNEST_TESTBED_NODE_LABEL, operator: Exists, effect: NoSchedule}]
SPEC
  kubectl -n demo wait --for=condition=Ready vc/demo --timeout=300s
else
  data_volume "{path: /tmp/vnest-sandbox/demo}"
  kubectl apply --server-side -f examples/quickstart.yaml
  kubectl -n demo wait --for=condition=Ready vc/demo --timeout=120s
fi
kubectl get vc -A -o wide
kubectl -n demo get statefulsets,pods,services,secrets,resourcequotas,limitranges,networkpolicies -o wide

if [ "$real" = 0 ]; then
  # The syncer, wired as in the StatefulSet pod: its config from Secret vc-config-demo, the
  # vc-demo ServiceAccount's token on the host (so only the operator's Role applies), and the
  # virtual API server's admin kubeconfig (the bed's second kube-apiserver stands in for the
  # control plane). Its API proxy serves Secret demo-certs on the port the bed's KWOK forwards
  # pod port 8443 to.
  certs=$state/sandbox-certs
  mkdir -p "$certs"
  for key in ca.crt tls.crt tls.key; do
    kubectl -n demo get secret demo-certs -o jsonpath="{.data.${key//./\\.}}" | base64 -d >"$certs/$key"
  done
  kubectl -n demo get secret vc-config-demo -o jsonpath='{.data.config\.yaml}' | base64 -d >"$state/sandbox-syncer-config.yaml"
  bash tests/testbed/mint-kubeconfig.sh demo vc-demo >"$state/sandbox-syncer-host.kubeconfig"
  pidfile=$state/pids/sandbox-syncer.pid
  if ! { [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }; then
    nohup target/debug/vnest-syncer --config "$state/sandbox-syncer-config.yaml" \
      --host-kubeconfig "$state/sandbox-syncer-host.kubeconfig" \
      --virtual-kubeconfig "$VNEST_VIRTUAL_KUBECONFIG" --metrics-address 127.0.0.1:18081 \
      --proxy-address "127.0.0.1:$VNEST_TESTBED_POD_PROXY_PORT" --certs-dir "$certs" \
      >"$state/logs/sandbox-syncer.log" 2>&1 &
    echo $! >"$pidfile"
  fi
fi

# The tenant's way in: vc-demo's kubeconfig, pointed at a local port-forward to pod demo-0's
# proxy (the host API server port-forwards through KWOK to the syncer above).
tenant_kc=$state/sandbox-tenant.kubeconfig
pidfile=$state/pids/sandbox-connect.pid
if ! { [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }; then
  rm -f "$tenant_kc"
  nohup target/debug/kubectl-vnest --kubeconfig "$VNEST_HOST_KUBECONFIG" connect demo -n demo \
    --port-forward --local-port 18444 --output "$tenant_kc" >"$state/logs/sandbox-connect.log" 2>&1 &
  echo $! >"$pidfile"
fi
tkubectl() { "$VNEST_TESTBED_BIN/kubectl" --kubeconfig "$tenant_kc" "$@"; }
for _ in $(seq 1 100); do
  [ -f "$tenant_kc" ] && tkubectl get --raw /readyz >/dev/null 2>&1 && break
  sleep 0.3
done

# The virtual controller-manager makes namespace default's ServiceAccount moments after the
# API server is ready; a pod created before it is refused.
for _ in $(seq 1 100); do
  tkubectl get serviceaccount default >/dev/null 2>&1 && break
  sleep 0.3
done

# A tenant pod, created through vc-demo, runs in the host namespace: on the real node a real
# container of the bed's echo image, else an nginx pod on a KWOK node.
if [ "$real" = 1 ]; then
  tkubectl apply -f - <<POD
apiVersion: v1
kind: Pod
metadata: {name: hello, namespace: default, labels: {app: hello}}
spec:
  nodeSelector: {$VNEST_TESTBED_NODE_LABEL: real}
  tolerations: [{key: $VNEST_TESTBED_NODE_LABEL, operator: Exists, effect: NoSchedule}]
  containers:
  - name: web
    image: $(bash tests/testbed/images.sh --list | awk '/vnest-echo/ { print $1 }')
    imagePullPolicy: Never
POD
else
  tkubectl apply -f - <<POD
apiVersion: v1
kind: Pod
metadata: {name: hello, namespace: default, labels: {app: hello}}
spec:
  containers: [{name: web, image: nginx:1.27}]
POD
fi
tkubectl wait --for=condition=Ready pod/hello --timeout=120s
echo "-- in the virtual cluster (through vc-demo and the proxy):"
tkubectl get pod hello -o wide
tkubectl logs hello
echo "-- on the host (namespace demo):"
kubectl -n demo get pods -l vcluster.loft.sh/managed-by=demo -o wide

cat <<USAGE

vnest sandbox is up.
  export KUBECONFIG=$VNEST_HOST_KUBECONFIG
  $VNEST_TESTBED_BIN/kubectl get vc -A -o wide
  operator log:     $state/logs/sandbox-operator.log
  operator metrics: curl -s http://127.0.0.1:18080/metrics | grep vnest_
  syncer log:       $([ "$real" = 1 ] && echo "$VNEST_TESTBED_BIN/kubectl -n demo logs demo-0 -c syncer" || echo "$state/logs/sandbox-syncer.log")
  as the tenant:    $VNEST_TESTBED_BIN/kubectl --kubeconfig $tenant_kc get pods -A
                    (vc-demo through \`kubectl vnest connect demo --port-forward\`, log $state/logs/sandbox-connect.log)
  stop:             bash hack/sandbox.sh down
USAGE
