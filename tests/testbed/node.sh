# The bed's real node: containerd + runc + the CNI bridge, a kubelet and kube-proxy joined to
# the host API server as node vnest-node-0. Sourced by up.sh (start) and down.sh (stop) after
# lib.sh; do not run it.
#
# Network: the bed creates bridge vnest0 (10.89.0.1/24) and nothing else. The node's address is
# the bridge's; the kubelet listens there (the API server dials it for logs and exec), pods get
# 10.89.0.0/24 addresses in network namespaces containerd creates, and the host API server is
# relayed from 10.89.0.1:16443 to its loopback port so pods reach it through the `kubernetes`
# Service. NodePorts open on 10.89.0.1 only; pods resolve through a resolv.conf that names no
# server outside the bed. Nothing the node does leaves the machine: the Service range is routed
# to the bridge (an address kube-proxy has no rule for yet goes nowhere, not to the default
# gateway), and chain VNEST-TESTBED rejects anything from the pod subnet that would be
# forwarded out of another interface.
#
# The node is tainted vnest.dev/testbed-node=real:NoSchedule and labelled
# vnest.dev/testbed-node=real: only pods that ask for it run there (every image it can run is
# built locally by images.sh); everything else keeps landing on the KWOK nodes.

NODE_NAME=vnest-node-0
NODE_BRIDGE=vnest0
NODE_IP=10.89.0.1
NODE_SUBNET=10.89.0.0/24
NODE_LABEL=vnest.dev/testbed-node
KUBELET_PORT=16350
KUBELET_HEALTHZ_PORT=16348
KUBE_PROXY_HEALTHZ_PORT=16356
KUBE_PROXY_METRICS_PORT=16349
SERVICE_CIDR=10.96.0.0/16
NODE_DIR="$STATE/node"
CONTAINERD_SOCK="$STATE/containerd/containerd.sock"
# The runc state of containerd's k8s.io namespace (down.sh kills what is left there).
RUNC_ROOT="$STATE/containerd/runc"

# Checks every kernel and system feature the node needs; prints one line naming the first one
# missing and returns 1. Takes well under a second: nothing here waits.
node_preflight() {
  [ "$(id -u)" = 0 ] || { echo "the real node needs root (containerd, runc and the kubelet manage mounts, cgroups and network namespaces)"; return 1; }
  local c
  if [ ! -f /sys/fs/cgroup/cgroup.controllers ]; then
    for c in cpu memory pids devices freezer; do
      [ -d "/sys/fs/cgroup/$c" ] || { echo "the real node needs the cgroup v1 '$c' controller mounted at /sys/fs/cgroup/$c"; return 1; }
    done
  fi
  grep -qw overlay /proc/filesystems || { echo "the real node needs the overlay filesystem (containerd's overlayfs snapshotter); /proc/filesystems does not list it"; return 1; }
  local probe="$NODE_DIR/overlay-probe"
  mkdir -p "$probe"/{lower,upper,work,merged}
  if ! mount -t overlay overlay -o "lowerdir=$probe/lower,upperdir=$probe/upper,workdir=$probe/work" "$probe/merged" 2>/dev/null; then
    echo "the real node needs overlay mounts on $STATE's filesystem; 'mount -t overlay' failed there"
    return 1
  fi
  umount "$probe/merged" && rm -rf "$probe"
  [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ] || { echo "the real node needs the br_netfilter kernel module (/proc/sys/net/bridge is missing): Services between pods on the bridge are NATed by iptables"; return 1; }
  command -v iptables >/dev/null || { echo "the real node needs iptables for kube-proxy (apt-get install iptables)"; return 1; }
  iptables -t nat -S >/dev/null 2>&1 || { echo "the real node needs the iptables nat table; 'iptables -t nat -S' failed"; return 1; }
  local tool
  for tool in socat conntrack; do
    command -v "$tool" >/dev/null || { echo "the real node needs $tool (apt-get install $tool)"; return 1; }
  done
  if ! ip link show "$NODE_BRIDGE" >/dev/null 2>&1; then
    ip link add "$NODE_BRIDGE" type bridge 2>/dev/null || { echo "the real node needs a Linux bridge; 'ip link add $NODE_BRIDGE type bridge' failed"; return 1; }
  fi
  return 0
}

node_write_config() { # node-bin
  local nb=$1
  mkdir -p "$NODE_DIR/cni" "$NODE_DIR/kubelet" "$NODE_DIR/pod-logs" "$STATE/containerd" "$RUNC_ROOT"
  cat >"$STATE/containerd/config.toml" <<EOF
version = 3
root = "$STATE/containerd/root"
state = "$STATE/containerd/state"
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"
[debug]
  address = "$CONTAINERD_SOCK.debug"
[plugins."io.containerd.cri.v1.runtime"]
  # No CAP_SYS_RESOURCE in this sandbox: runc may not lower oom_score_adj.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "$nb/runc"
        Root = "$RUNC_ROOT"
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["$nb/cni"]
    conf_dir = "$NODE_DIR/cni"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "registry.k8s.io/pause:3.10"
[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
EOF
  cat >"$NODE_DIR/cni/10-vnest.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "vnest-testbed",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$NODE_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$NODE_SUBNET", "gateway": "$NODE_IP", "rangeStart": "10.89.0.10"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$NODE_DIR/cni-ipam"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  # No server outside the bed: lookups of names the cluster does not serve fail at once.
  echo "nameserver 127.0.0.1" >"$NODE_DIR/resolv.conf"
  cat >"$NODE_DIR/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine mounts cgroup v1: kubelet >= 1.35 starts there only when told so.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
imageServiceEndpoint: unix://$CONTAINERD_SOCK
podLogsDir: $NODE_DIR/pod-logs
resolvConf: $NODE_DIR/resolv.conf
clusterDomain: cluster.local
maxPods: 60
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%}
registerWithTaints:
- {key: $NODE_LABEL, value: real, effect: NoSchedule}
EOF
  cat >"$NODE_DIR/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $STATE/kube-proxy.kubeconfig}
hostnameOverride: $NODE_NAME
mode: iptables
clusterCIDR: $NODE_SUBNET
detectLocalMode: ClusterCIDR
healthzBindAddress: 127.0.0.1:$KUBE_PROXY_HEALTHZ_PORT
metricsBindAddress: 127.0.0.1:$KUBE_PROXY_METRICS_PORT
nodePortAddresses: ["$NODE_IP/32"]
iptables: {localhostNodePorts: false}
# Leave the machine's conntrack limits as they are.
conntrack: {maxPerCore: 0, min: 0}
EOF
}

# Starts the node's processes (the caller's launch/wait_for/fail). Pods run once images.sh has
# imported the images they use.
node_start() { # node-bin
  local nb=$1
  ip addr replace "$NODE_IP/24" dev "$NODE_BRIDGE"
  ip link set "$NODE_BRIDGE" up
  # Replies between two pods on the bridge pass iptables, so Service NAT is undone for them.
  echo 1 >/proc/sys/net/bridge/bridge-nf-call-iptables
  echo 1 >/proc/sys/net/ipv4/ip_forward
  ip route replace "$SERVICE_CIDR" dev "$NODE_BRIDGE"
  iptables -N VNEST-TESTBED 2>/dev/null || iptables -F VNEST-TESTBED
  iptables -A VNEST-TESTBED -s "$NODE_SUBNET" ! -o "$NODE_BRIDGE" -j REJECT
  iptables -C FORWARD -j VNEST-TESTBED 2>/dev/null || iptables -I FORWARD -j VNEST-TESTBED
  node_write_config "$nb"
  launch apiserver-relay socat -lf "$LOGS/apiserver-relay.log" "TCP-LISTEN:$HOST_PORT,bind=$NODE_IP,fork,reuseaddr" "TCP:127.0.0.1:$HOST_PORT"
  launch containerd env PATH="$nb:$PATH" "$nb/containerd" --config "$STATE/containerd/config.toml" --log-level warn
  wait_for containerd 30 "containerd's socket" "$nb/ctr" --address "$CONTAINERD_SOCK" version
  launch kubelet env PATH="$nb:$PATH" "$nb/kubelet" \
    --config="$NODE_DIR/kubelet.yaml" \
    --kubeconfig="$STATE/kubelet.kubeconfig" \
    --root-dir="$NODE_DIR/kubelet" \
    --cert-dir="$NODE_DIR/kubelet/pki" \
    --hostname-override="$NODE_NAME" \
    --node-ip="$NODE_IP" \
    --node-labels="$NODE_LABEL=real"
  launch kube-proxy "$nb/kube-proxy" --config="$NODE_DIR/kube-proxy.yaml"
}

node_ready() { kc wait --for=condition=Ready --timeout=2s "node/$NODE_NAME"; }

# Deletes the node's containers (runc state), so none outlives the bed.
node_containers_stop() { # node-bin (empty when the bed ran no node)
  local nb=${1:-} id
  [ -n "$nb" ] && [ -x "$nb/runc" ] && [ -d "$RUNC_ROOT/k8s.io" ] || return 0
  for id in $("$nb/runc" --root "$RUNC_ROOT/k8s.io" list -q 2>/dev/null); do
    "$nb/runc" --root "$RUNC_ROOT/k8s.io" delete --force "$id" >/dev/null 2>&1 || true
  done
}

# Removes what the stopped node left in the machine: mounts under the state folder,
# kube-proxy's iptables rules and the bridge.
node_stop() { # node-bin (empty when the bed ran no node)
  local nb=${1:-} m
  if [ -n "$nb" ] && [ -x "$nb/kube-proxy" ]; then
    "$nb/kube-proxy" --cleanup >/dev/null 2>&1 || true
  fi
  { grep -o " $STATE/[^ ]*" /proc/mounts 2>/dev/null || true; } | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
  if iptables -S VNEST-TESTBED >/dev/null 2>&1; then
    iptables -D FORWARD -j VNEST-TESTBED 2>/dev/null || true
    iptables -F VNEST-TESTBED && iptables -X VNEST-TESTBED || true
  fi
  if ip link show "$NODE_BRIDGE" >/dev/null 2>&1; then
    ip link del "$NODE_BRIDGE" 2>/dev/null || true
  fi
}
