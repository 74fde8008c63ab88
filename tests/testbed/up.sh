#!/usr/bin/env bash
# Starts (idempotently) a local Kubernetes test bed: etcd, a "host" cluster (kube-apiserver,
# kube-controller-manager, kube-scheduler, kwok with two fake nodes, and a real node: containerd,
# runc, CNI, kubelet, kube-proxy — see node.sh) and a "virtual" kube-apiserver with its own
# kube-controller-manager, sharing the etcd under another prefix.
# Prints the env file path as the only stdout line; progress goes to stderr.
#
#   up.sh [--owner-pid PID]   tear the bed down (down.sh) once PID exits
#
# VNEST_TESTBED_NODE=required (default): a machine that cannot run the real node fails the
# start within seconds, naming the missing feature. =optional: the bed starts without it and
# the env file says why (VNEST_TESTBED_NODE=absent: ...); the sandbox uses this.
set -eEuo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

owner_pid=""
node_mode=${VNEST_TESTBED_NODE:-required}
case $node_mode in required | optional) ;; *) echo "up.sh: VNEST_TESTBED_NODE must be required or optional, not '$node_mode'" >&2; exit 2 ;; esac
while [ $# -gt 0 ]; do
  case $1 in
    --owner-pid) owner_pid=${2:?--owner-pid needs a PID}; shift 2 ;;
    --owner-pid=*) owner_pid=${1#*=}; shift ;;
    -h | --help) sed -n '2,8p' "$0" >&2; exit 0 ;;
    *) echo "up.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
done
if [ -n "$owner_pid" ] && ! alive "$owner_pid"; then
  echo "up.sh: --owner-pid $owner_pid is not a running process" >&2
  exit 2
fi

mkdir -p "$(dirname "$STATE")"
exec 9>"$LOCK"
if ! flock -w 600 9; then
  echo "up.sh: timed out after 600s waiting for the lock $LOCK" >&2
  exit 1
fi

HOST_SERVER="https://127.0.0.1:$HOST_PORT"
VIRTUAL_SERVER="https://127.0.0.1:$VIRTUAL_PORT"
HOST_KC="$STATE/host.kubeconfig"
VIRTUAL_KC="$STATE/virtual.kubeconfig"

readyz() {
  curl -sf --max-time 3 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
    "https://127.0.0.1:$1/readyz" >/dev/null 2>&1
}

# Healthy: env file written (the last step of a start), every recorded component alive and
# both API servers ready.
healthy() {
  [ -f "$ENV_FILE" ] || return 1
  local n p parts="etcd host-apiserver host-controller-manager host-scheduler kwok virtual-apiserver virtual-controller-manager sample-apiserver"
  if grep -q "^VNEST_TESTBED_NODE=$NODE_NAME$" "$ENV_FILE"; then
    parts="$parts containerd kubelet kube-proxy apiserver-relay"
  elif [ "$node_mode" = required ]; then
    return 1
  fi
  for n in $parts; do
    p=$(cat "$PIDS/$n.pid" 2>/dev/null) || return 1
    alive "$p" && ours "$p" || return 1
  done
  readyz "$HOST_PORT" && readyz "$VIRTUAL_PORT"
}

# Registers a reaper for the owner, replacing any previous one. The reaper is detached
# (own session, no inherited fds) and runs down.sh once the owner is gone; the owner is
# identified by pid and start time, so pid reuse cannot keep the bed alive.
register_reaper() {
  local owner=$1 start old
  start=$(proc_start "$owner") || { echo "up.sh: owner pid $owner exited" >&2; exit 1; }
  old=$(reaper_pid) || old=""
  mkdir -p "$PIDS" "$LOGS"
  (
    for fd in /proc/$BASHPID/fd/*; do
      fd=${fd##*/}
      if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi
    done
    # shellcheck disable=SC2016
    setsid nohup bash -c '
      state=$1 owner=$2 start=$3 down=$4
      st() { local s; s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1; s=${s##*) }; set -- $s; echo "${20}"; }
      echo "$(date -Is) watching owner pid $owner"
      while [ "$(st "$owner")" = "$start" ]; do sleep 1; done
      echo "$(date -Is) owner pid $owner exited; running down.sh"
      VNEST_TESTBED_DIR=$state exec bash "$down" --from-reaper
    ' "$REAPER_MARK" "$STATE" "$owner" "$start" "$here/down.sh" \
      </dev/null >>"$LOGS/reaper.log" 2>&1 &
    echo $! >"$PIDS/reaper.pid"
  )
  if [ -n "$old" ]; then
    kill -TERM "$old" 2>/dev/null || true
  fi
  say "reaper $(cat "$PIDS/reaper.pid") watches owner pid $owner"
}

if healthy; then
  [ -n "$owner_pid" ] && register_reaper "$owner_pid"
  echo "$ENV_FILE"
  exit 0
fi

t0=$(date +%s.%N)
elapsed() { awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1fs", b - a }'; }

# Not (fully) up: stop whatever is left of an earlier bed and start from a clean state.
stop_components
old_reaper=$(reaper_pid) || old_reaper=""
if [ -n "$old_reaper" ]; then stop_pids "$old_reaper"; fi
remove_state || exit 1
mkdir -p "$PKI" "$LOGS" "$PIDS" "$STATE/etcd" "$STATE/kwok-home"
touch "$STATE/$STATE_MARK"
chmod 700 "$STATE/etcd" "$PKI"

# The real node's kernel features, checked before anything starts.
node_absent=""
if ! why=$(node_preflight); then
  if [ "$node_mode" = required ]; then
    echo "up.sh: $why" >&2
    echo "up.sh: (VNEST_TESTBED_NODE=optional starts the bed without the real node)" >&2
    remove_state || true
    exit 1
  fi
  node_absent=$why
  say "no real node: $why"
fi

busy="" listening=" $(ss -Htln 2>/dev/null | awk '{ sub(/.*:/, "", $4); printf "%s ", $4 }')"
for p in $ALL_PORTS $KUBELET_PORT; do
  case $listening in *" $p "*) busy="$busy $p" ;; esac
done
if [ -n "$busy" ]; then
  echo "up.sh: port(s) already in use by something that is not this test bed:$busy" >&2
  for p in $busy; do ss -Htlnp "sport = :$p" >&2 2>/dev/null || true; done
  exit 1
fi

BIN=$(bash "$here/build.sh") || { echo "up.sh: build.sh failed" >&2; exit 1; }
NODE_BIN=""
if [ -z "$node_absent" ]; then
  NODE_BIN=$(bash "$here/build-node.sh") || { echo "up.sh: build-node.sh failed" >&2; exit 1; }
  echo "$NODE_BIN" >"$STATE/node-bin"
fi
KUBECTL=("$BIN/kubectl" --cache-dir="$STATE/kube-cache")

# Called on any failure after this point: show the log of the failing component, stop
# everything that was started (logs stay in $STATE/logs for inspection).
fail() {
  local comp=$1; shift
  echo "up.sh: FAILED ($comp): $*" >&2
  if [ -f "$LOGS/$comp.log" ]; then
    echo "---- last 30 lines of $LOGS/$comp.log ----" >&2
    tail -n 30 "$LOGS/$comp.log" >&2
    echo "----" >&2
  fi
  stop_components || true
  rm -f "$ENV_FILE"
  exit 1
}
trap 'fail up.sh "unexpected error at line $LINENO (exit $?)"' ERR

# ---------------------------------------------------------------- PKI (openssl)
gen_ca() { # name CN
  cat >"$PKI/$1.cnf" <<EOF
[req]
distinguished_name = dn
prompt = no
[dn]
CN = $2
[v3]
basicConstraints = critical, CA:TRUE
keyUsage = critical, digitalSignature, keyEncipherment, keyCertSign, cRLSign
subjectKeyIdentifier = hash
EOF
  openssl req -x509 -new -nodes -newkey rsa:2048 -sha256 -days 3650 -config "$PKI/$1.cnf" -extensions v3 \
    -keyout "$PKI/$1.key" -out "$PKI/$1.crt" 2>>"$LOGS/pki.log"
}
gen_cert() { # name ca subject-dn-lines extendedKeyUsage [subjectAltName]
  local name=$1 ca=$2 dn=$3 eku=$4 san=${5:-}
  {
    printf '[req]\ndistinguished_name = dn\nprompt = no\n[dn]\n%b\n[v3]\n' "$dn"
    printf 'basicConstraints = critical, CA:FALSE\nkeyUsage = critical, digitalSignature, keyEncipherment\n'
    printf 'extendedKeyUsage = %s\nsubjectKeyIdentifier = hash\nauthorityKeyIdentifier = keyid\n' "$eku"
    [ -z "$san" ] || printf 'subjectAltName = %s\n' "$san"
  } >"$PKI/$name.cnf"
  openssl req -new -nodes -newkey rsa:2048 -sha256 -config "$PKI/$name.cnf" \
    -keyout "$PKI/$name.key" -out "$PKI/$name.csr" 2>>"$LOGS/pki.log"
  openssl x509 -req -sha256 -days 365 -in "$PKI/$name.csr" -CA "$PKI/$ca.crt" -CAkey "$PKI/$ca.key" \
    -set_serial "0x$(openssl rand -hex 16)" -extfile "$PKI/$name.cnf" -extensions v3 \
    -out "$PKI/$name.crt" 2>>"$LOGS/pki.log"
  rm -f "$PKI/$name.csr"
}
gen_pki() {
  local sans="IP:127.0.0.1,DNS:localhost,IP:10.96.0.1,DNS:kubernetes,DNS:kubernetes.default"
  sans="$sans,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  gen_ca ca vnest-testbed-ca
  gen_ca front-proxy-ca vnest-testbed-front-proxy-ca
  gen_cert apiserver ca 'CN = kube-apiserver' serverAuth "$sans" &
  gen_cert admin ca 'O = system:masters\nCN = vnest-admin' clientAuth &
  gen_cert controller-manager ca 'CN = system:kube-controller-manager' clientAuth &
  gen_cert scheduler ca 'CN = system:kube-scheduler' clientAuth &
  gen_cert node ca "O = system:nodes\nCN = system:node:$NODE_NAME" clientAuth &
  gen_cert kube-proxy ca 'CN = system:kube-proxy' clientAuth &
  gen_cert front-proxy-client front-proxy-ca 'CN = front-proxy-client' clientAuth &
  # The aggregator checks the name of the APIService's Service, not the address it dials.
  gen_cert sample-apiserver ca 'CN = api.wardle.svc' serverAuth "DNS:api.wardle.svc,DNS:localhost,IP:127.0.0.1" &
  openssl genrsa -out "$PKI/sa.key" 2048 2>>"$LOGS/pki.log" &&
    openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>>"$LOGS/pki.log" &
  local j ok=1
  for j in $(jobs -p); do wait "$j" || ok=0; done
  [ "$ok" = 1 ] || return 1
  chmod 600 "$PKI"/*.key
  echo "$PKI_VERSION" >"$PKI/.complete"
}
# Generated once and kept across down.sh; regenerated when the layout changed (PKI_VERSION)
# or a certificate expires within 30 days.
PKI_VERSION=3
pki_current() {
  [ "$(cat "$PKI/.complete" 2>/dev/null)" = "$PKI_VERSION" ] || return 1
  local c
  for c in ca front-proxy-ca apiserver admin controller-manager scheduler node kube-proxy front-proxy-client sample-apiserver; do
    openssl x509 -noout -checkend 2592000 -in "$PKI/$c.crt" >/dev/null 2>&1 || return 1
  done
  [ -f "$PKI/sa.key" ] && [ -f "$PKI/sa.pub" ]
}
if ! pki_current; then
  say "generating certificates in $PKI"
  rm -rf "$PKI" && mkdir -p "$PKI" && chmod 700 "$PKI"
  gen_pki || fail pki "certificate generation with openssl failed"
fi

write_kubeconfig() { # file server context cert-name
  local b64ca b64crt b64key
  b64ca=$(base64 -w0 <"$PKI/ca.crt")
  b64crt=$(base64 -w0 <"$PKI/$4.crt")
  b64key=$(base64 -w0 <"$PKI/$4.key")
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: $3
  cluster:
    server: $2
    certificate-authority-data: $b64ca
users:
- name: $3-$4
  user:
    client-certificate-data: $b64crt
    client-key-data: $b64key
contexts:
- name: $3
  context:
    cluster: $3
    user: $3-$4
current-context: $3
EOF
  chmod 600 "$1"
}
write_kubeconfig "$HOST_KC" "$HOST_SERVER" vnest-host admin
write_kubeconfig "$VIRTUAL_KC" "$VIRTUAL_SERVER" vnest-virtual admin
write_kubeconfig "$STATE/host-controller-manager.kubeconfig" "$HOST_SERVER" vnest-host controller-manager
write_kubeconfig "$STATE/host-scheduler.kubeconfig" "$HOST_SERVER" vnest-host scheduler
write_kubeconfig "$STATE/virtual-controller-manager.kubeconfig" "$VIRTUAL_SERVER" vnest-virtual controller-manager
write_kubeconfig "$STATE/kubelet.kubeconfig" "$HOST_SERVER" vnest-host node
write_kubeconfig "$STATE/kube-proxy.kubeconfig" "$HOST_SERVER" vnest-host kube-proxy

# ---------------------------------------------------------------- processes
# wait_for NAME TIMEOUT_S DESCRIPTION CMD...: poll CMD every 0.2s; fail fast if NAME died.
wait_for() {
  local name=$1 timeout=$2 what=$3; shift 3
  local deadline pid
  deadline=$(($(date +%s) + timeout))
  pid=$(cat "$PIDS/$name.pid" 2>/dev/null || true)
  until "$@" >/dev/null 2>&1; do
    if [ -n "$pid" ] && ! alive "$pid"; then fail "$name" "$name exited while waiting for $what"; fi
    if [ "$(date +%s)" -ge "$deadline" ]; then fail "$name" "timed out after ${timeout}s waiting for $what"; fi
    sleep 0.2
  done
}

say "starting etcd on 127.0.0.1:$ETCD_PORT"
launch etcd "$BIN/etcd" \
  --name=vnest-testbed \
  --data-dir="$STATE/etcd" \
  --listen-client-urls="http://127.0.0.1:$ETCD_PORT" \
  --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster="vnest-testbed=http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster-state=new \
  --unsafe-no-fsync=true \
  --snapshot-count=10000 \
  --quota-backend-bytes=4294967296 \
  --log-level=warn
etcd_healthy() { curl -sf --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" | grep -q '"health":"true"'; }
wait_for etcd 30 "etcd /health" etcd_healthy
say "etcd healthy after $(elapsed)"

apiserver() { # name port prefix issuer [extra flags...]
  local name=$1 port=$2 prefix=$3 issuer=$4
  shift 4
  launch "$name" "$BIN/kube-apiserver" \
    --bind-address=127.0.0.1 \
    --secure-port="$port" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --etcd-prefix="$prefix" \
    --tls-cert-file="$PKI/apiserver.crt" \
    --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" \
    --authorization-mode=Node,RBAC \
    --allow-privileged=true \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --service-account-issuer="$issuer" \
    --service-account-key-file="$PKI/sa.pub" \
    --service-account-signing-key-file="$PKI/sa.key" \
    --requestheader-client-ca-file="$PKI/front-proxy-ca.crt" \
    --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User \
    --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$PKI/front-proxy-client.crt" \
    --proxy-client-key-file="$PKI/front-proxy-client.key" \
    --enable-aggregator-routing=false \
    --profiling=false \
    "$@"
}
say "starting host kube-apiserver on 127.0.0.1:$HOST_PORT and virtual kube-apiserver on 127.0.0.1:$VIRTUAL_PORT"
# The host's `kubernetes` Service leads pods on the real node to the API server through the
# relay on the node's address (node.sh); its kubelet is dialled with the admin certificate, at
# its InternalIP (the default dials the node's host name first, which only the machine's own
# resolver could answer, outside the bed).
apiserver host-apiserver "$HOST_PORT" /host https://kubernetes.default.svc.cluster.local \
  --advertise-address="$NODE_IP" --endpoint-reconciler-type=lease \
  --kubelet-client-certificate="$PKI/admin.crt" --kubelet-client-key="$PKI/admin.key" \
  --kubelet-preferred-address-types=InternalIP
apiserver virtual-apiserver "$VIRTUAL_PORT" /virtual https://virtual.vnest-testbed.local \
  --advertise-address=127.0.0.1 --endpoint-reconciler-type=none
wait_for host-apiserver 90 "host kube-apiserver /readyz" readyz "$HOST_PORT"
wait_for virtual-apiserver 90 "virtual kube-apiserver /readyz" readyz "$VIRTUAL_PORT"
say "API servers ready after $(elapsed)"

controller_manager() { # name kubeconfig port controllers
  launch "$1" "$BIN/kube-controller-manager" \
    --kubeconfig="$2" \
    --authentication-kubeconfig="$2" \
    --authorization-kubeconfig="$2" \
    --bind-address=127.0.0.1 \
    --secure-port="$3" \
    --leader-elect=false \
    --controllers="$4" \
    --use-service-account-credentials=true \
    --service-account-private-key-file="$PKI/sa.key" \
    --root-ca-file="$PKI/ca.crt" \
    --cluster-signing-cert-file="$PKI/ca.crt" \
    --cluster-signing-key-file="$PKI/ca.key" \
    --tls-cert-file="$PKI/apiserver.crt" \
    --tls-private-key-file="$PKI/apiserver.key" \
    --flex-volume-plugin-dir="$STATE/$1/flexvolume" \
    --profiling=false
}
# '*' = every on-by-default controller: garbage-collector, namespace, serviceaccount(-token),
# statefulset, replicaset, deployment, endpointslice, node-lifecycle, ... are all in it.
controller_manager host-controller-manager "$STATE/host-controller-manager.kubeconfig" "$HOST_KCM_PORT" '*'
# The virtual cluster has no nodes of its own: the controllers of a control plane whose pods
# the syncer runs elsewhere (workload controllers make pods; nothing that manages nodes,
# endpoints or pod lifecycle, which the syncer owns). Override with VNEST_VIRTUAL_CONTROLLERS
# (same syntax as --controllers).
controller_manager virtual-controller-manager "$STATE/virtual-controller-manager.kubeconfig" "$VIRTUAL_KCM_PORT" \
  "${VNEST_VIRTUAL_CONTROLLERS:-namespace-controller,serviceaccount-controller,serviceaccount-token-controller,garbage-collector-controller,root-ca-certificate-publisher-controller,clusterrole-aggregation-controller,deployment-controller,replicaset-controller}"

launch host-scheduler "$BIN/kube-scheduler" \
  --kubeconfig="$STATE/host-scheduler.kubeconfig" \
  --authentication-kubeconfig="$STATE/host-scheduler.kubeconfig" \
  --authorization-kubeconfig="$STATE/host-scheduler.kubeconfig" \
  --bind-address=127.0.0.1 \
  --secure-port="$HOST_SCHED_PORT" \
  --tls-cert-file="$PKI/apiserver.crt" \
  --tls-private-key-file="$PKI/apiserver.key" \
  --leader-elect=false

# kwok's server answers the host API server's pods/log and pods/exec for every fake pod:
# logs from one file, exec runs the command on this machine (the proxy tests read both), and
# port-forwards to port 8443 reach the syncer proxy a test runs on $POD_PROXY_PORT.
mkdir -p "$STATE/kwok-home/.kwok"
# CRI log format (time, stream, tag, message), which kwok parses.
printf '2026-01-01T00:00:00.000000000Z stdout F vnest test bed: a log line from a kwok pod\n' \
  >"$STATE/kwok-pod.log"
cat >"$STATE/kwok-home/.kwok/kwok.yaml" <<EOF
kind: ClusterLogs
apiVersion: kwok.x-k8s.io/v1alpha1
metadata: {name: all-pods}
spec:
  logs:
  - logsFile: $STATE/kwok-pod.log
---
kind: ClusterPortForward
apiVersion: kwok.x-k8s.io/v1alpha1
metadata: {name: syncer-proxy}
spec:
  forwards:
  - ports: [8443]
    target: {address: 127.0.0.1, port: $POD_PROXY_PORT}
---
kind: ClusterExec
apiVersion: kwok.x-k8s.io/v1alpha1
metadata: {name: all-pods}
spec:
  execs:
  - local:
      workDir: $STATE
EOF

# HOME points into the state folder so that kwok reads the file above, not ~/.kwok/kwok.yaml.
# --node-ip/--node-port are what the fake nodes report as their kubelet endpoint: kwok's own
# server, on loopback (without --server-address kwok would bind 0.0.0.0:<node-port>).
launch kwok env HOME="$STATE/kwok-home" "$BIN/kwok" \
  --kubeconfig="$HOST_KC" \
  --manage-all-nodes=false \
  --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
  --cidr=10.244.0.0/16 \
  --node-ip=127.0.0.1 \
  --node-port="$KWOK_PORT" \
  --server-address="127.0.0.1:$KWOK_PORT" \
  --tls-cert-file="$PKI/apiserver.crt" \
  --tls-private-key-file="$PKI/apiserver.key" \
  --node-lease-duration-seconds=40

kc() { "${KUBECTL[@]}" --kubeconfig="$HOST_KC" "$@"; }
kv() { "${KUBECTL[@]}" --kubeconfig="$VIRTUAL_KC" "$@"; }

nodes_yaml() {
  local i
  for i in 0 1; do
    cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$i
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    type: kwok
    kubernetes.io/arch: amd64
    kubernetes.io/hostname: kwok-node-$i
    kubernetes.io/os: linux
    kubernetes.io/role: agent
    node-role.kubernetes.io/agent: ""
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
  capacity: {cpu: "32", memory: 256Gi, pods: "110"}
  nodeInfo:
    architecture: amd64
    operatingSystem: linux
    kubeletVersion: fake
    kubeProxyVersion: fake
EOF
  done
}
nodes_yaml | kc apply -f - >>"$LOGS/up.log" 2>&1 || fail up "creating the kwok nodes failed (see $LOGS/up.log)"

# The sample-apiserver serves wardle.example.com (flunders, fischers; v1alpha1 and v1beta1)
# and is aggregated into the host: the custom-resource tests' extension API server. Loopback
# endpoints are refused in EndpointSlices, so its Service is an ExternalName for localhost,
# which the aggregator dials when it routes by Service (--enable-aggregator-routing=false).
launch sample-apiserver "$BIN/sample-apiserver" \
  --bind-address=127.0.0.1 \
  --secure-port="$SAMPLE_APISERVER_PORT" \
  --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
  --etcd-prefix=/wardle \
  --kubeconfig="$HOST_KC" \
  --authentication-kubeconfig="$HOST_KC" \
  --authorization-kubeconfig="$HOST_KC" \
  --tls-cert-file="$PKI/sample-apiserver.crt" \
  --tls-private-key-file="$PKI/sample-apiserver.key" \
  --profiling=false
wardle_yaml() {
  local v p ca
  ca=$(base64 -w0 <"$PKI/ca.crt")
  cat <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: wardle}
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: wardle}
spec:
  type: ExternalName
  externalName: localhost
  ports: [{name: https, port: $SAMPLE_APISERVER_PORT, protocol: TCP}]
EOF
  for v in v1alpha1:15 v1beta1:16; do
    p=${v#*:} v=${v%:*}
    cat <<EOF
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: $v.wardle.example.com}
spec:
  group: wardle.example.com
  version: $v
  groupPriorityMinimum: 1000
  versionPriority: $p
  service: {namespace: wardle, name: api, port: $SAMPLE_APISERVER_PORT}
  caBundle: $ca
EOF
  done
}
wardle_yaml | kc apply -f - >>"$LOGS/up.log" 2>&1 || fail up "registering the sample-apiserver failed (see $LOGS/up.log)"

for n in host-controller-manager virtual-controller-manager host-scheduler kwok sample-apiserver; do
  p=$(cat "$PIDS/$n.pid"); alive "$p" || fail "$n" "$n exited right after start"
done
nodes_ready() { kc wait --for=condition=Ready --timeout=2s node/kwok-node-0 node/kwok-node-1; }
wait_for kwok 60 "nodes kwok-node-0 and kwok-node-1 Ready" nodes_ready
say "nodes Ready after $(elapsed)"
wait_for host-controller-manager 60 "ServiceAccount default/default on the host" kc get serviceaccount default -n default
wait_for virtual-controller-manager 60 "ServiceAccount default/default on the virtual cluster" kv get serviceaccount default -n default
say "default ServiceAccounts present after $(elapsed)"
if [ -z "$node_absent" ]; then
  say "starting the real node $NODE_NAME (containerd, kubelet, kube-proxy) on $NODE_IP"
  node_start "$NODE_BIN"
  wait_for kubelet 90 "node $NODE_NAME Ready" node_ready
  say "real node Ready after $(elapsed)"
  VNEST_TESTBED_DIR=$STATE bash "$here/images.sh" bed >>"$LOGS/images.log" 2>&1 ||
    fail images "building or importing the bed's images failed (see $LOGS/images.log)"
  say "bed images imported after $(elapsed)"
fi
wardle_available() {
  kc wait --for=condition=Available --timeout=2s apiservice/v1alpha1.wardle.example.com apiservice/v1beta1.wardle.example.com
}
wait_for sample-apiserver 60 "APIServices of wardle.example.com Available" wardle_available
say "sample-apiserver aggregated after $(elapsed)"

# Smoke test: a pod is scheduled on a kwok node and becomes Running; removed again.
# VNEST_TESTBED_SMOKE=0 skips it.
if [ "${VNEST_TESTBED_SMOKE:-1}" != 0 ]; then
  cat <<EOF | kc apply -f - >>"$LOGS/up.log" 2>&1 || fail up "creating the smoke pod failed (see $LOGS/up.log)"
apiVersion: v1
kind: Pod
metadata:
  name: vnest-testbed-smoke
  namespace: default
spec:
  nodeSelector: {type: kwok}
  terminationGracePeriodSeconds: 0
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.10
EOF
  pod_running() { [ "$(kc get pod vnest-testbed-smoke -n default -o 'jsonpath={.status.phase}')" = Running ]; }
  wait_for host-scheduler 60 "smoke pod scheduled on a kwok node and Running" pod_running
  kc delete pod vnest-testbed-smoke -n default --wait=true --timeout=30s >>"$LOGS/up.log" 2>&1 ||
    fail kwok "deleting the smoke pod failed"
  say "smoke pod ran on a kwok node after $(elapsed)"
  if [ -z "$node_absent" ]; then
    cat <<EOF | kc apply -f - >>"$LOGS/up.log" 2>&1 || fail up "creating the real-node smoke pod failed (see $LOGS/up.log)"
apiVersion: v1
kind: Pod
metadata:
  name: vnest-testbed-node-smoke
  namespace: default
spec:
  nodeSelector: {$NODE_LABEL: real}
  tolerations: [{key: $NODE_LABEL, operator: Exists, effect: NoSchedule}]
  terminationGracePeriodSeconds: 1
  automountServiceAccountToken: false
  containers:
  - name: echo
    image: $(VNEST_TESTBED_DIR=$STATE bash "$here/images.sh" --list | awk '/vnest-echo/ { print $1 }')
    imagePullPolicy: Never
EOF
    pod_ip() { kc get pod vnest-testbed-node-smoke -n default -o 'jsonpath={.status.podIP}'; }
    echo_answers() { local ip; ip=$(pod_ip) && [ -n "$ip" ] && curl -sf --max-time 2 "http://$ip:8080/smoke" | grep -q "GET /smoke"; }
    wait_for kubelet 90 "smoke pod Running on $NODE_NAME and answering HTTP" echo_answers
    kc delete pod vnest-testbed-node-smoke -n default --wait=true --timeout=60s >>"$LOGS/up.log" 2>&1 ||
      fail kubelet "deleting the real-node smoke pod failed"
    say "smoke pod ran as a real container on $NODE_NAME after $(elapsed)"
  fi
fi

cat >"$ENV_FILE.tmp" <<EOF
VNEST_TESTBED_DIR=$STATE
VNEST_TESTBED_BIN=$BIN
VNEST_HOST_KUBECONFIG=$HOST_KC
VNEST_VIRTUAL_KUBECONFIG=$VIRTUAL_KC
VNEST_HOST_SERVER=$HOST_SERVER
VNEST_VIRTUAL_SERVER=$VIRTUAL_SERVER
VNEST_TESTBED_CA=$PKI/ca.crt
VNEST_TESTBED_POD_PROXY_PORT=$POD_PROXY_PORT
VNEST_TESTBED_NODE=${node_absent:+absent: $node_absent}${node_absent:-$NODE_NAME}
VNEST_TESTBED_NODE_BIN=$NODE_BIN
VNEST_TESTBED_NODE_LABEL=$NODE_LABEL
VNEST_CONTAINERD_SOCK=$CONTAINERD_SOCK
EOF
mv "$ENV_FILE.tmp" "$ENV_FILE"
trap - ERR

[ -n "$owner_pid" ] && register_reaper "$owner_pid"
say "test bed up in $(elapsed)"
echo "$ENV_FILE"
