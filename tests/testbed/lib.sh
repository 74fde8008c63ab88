# Shared by up.sh, down.sh and mint-kubeconfig.sh; source it, do not run it.
# Everything binds to 127.0.0.1 only.

STATE=${VNEST_TESTBED_DIR:-/tmp/vnest-testbed}
case $STATE in /*) ;; *) STATE="$PWD/$STATE" ;; esac
STATE=${STATE%/}
# The lock lives next to the state folder, not inside it: down.sh deletes the folder, and a
# lock file deleted while held would let the next caller lock a fresh inode.
LOCK="$STATE.lock"
PKI="$STATE/pki"
LOGS="$STATE/logs"
PIDS="$STATE/pids"
ENV_FILE="$STATE/env"

ETCD_PORT=12379
ETCD_PEER_PORT=12380
HOST_PORT=16443
HOST_KCM_PORT=16257
HOST_SCHED_PORT=16259
KWOK_PORT=16250
VIRTUAL_PORT=17443
VIRTUAL_KCM_PORT=17257
# k8s.io/sample-apiserver (wardle.example.com: flunders, fischers), aggregated into the host.
SAMPLE_APISERVER_PORT=16445
# Not bound by the bed: kwok forwards port-forwards to any fake pod's port 8443 (the syncer
# proxy's) here, where a test or the sandbox runs the syncer's proxy.
POD_PROXY_PORT=18443
ALL_PORTS="$ETCD_PORT $ETCD_PEER_PORT $HOST_PORT $HOST_KCM_PORT $HOST_SCHED_PORT $KWOK_PORT $VIRTUAL_PORT $VIRTUAL_KCM_PORT $SAMPLE_APISERVER_PORT"
# The real node (node.sh): constants, preflight, start and stop.
# shellcheck source=node.sh
source "$(dirname "${BASH_SOURCE[0]}")/node.sh"
ALL_PORTS="$ALL_PORTS $KUBELET_HEALTHZ_PORT $KUBE_PROXY_HEALTHZ_PORT $KUBE_PROXY_METRICS_PORT"

# Executable names of the components; used to recognise our processes in /proc.
COMPONENT_EXES="etcd kube-apiserver kube-controller-manager kube-scheduler kwok sample-apiserver kubelet kube-proxy containerd containerd-shim-runc-v2 socat"
REAPER_MARK=vnest-testbed-reaper

say() { echo "[testbed] $*" >&2; }

# Start time (clock ticks since boot) of a pid, or fail when it is gone or a zombie.
proc_start() {
  local s
  s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  s=${s##*) }
  # shellcheck disable=SC2086
  set -- $s
  [ "$1" != Z ] || return 1
  echo "${20}"
}

alive() { proc_start "$1" >/dev/null; }

# launch NAME CMD...: detached (own session, SIGHUP ignored, no inherited fds), output to
# $LOGS/NAME.log, pid to $PIDS/NAME.pid. Double fork: the process is re-parented at once.
launch() {
  local name=$1; shift
  (
    for fd in /proc/$BASHPID/fd/*; do
      fd=${fd##*/}
      if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi
    done
    cd "$STATE"
    setsid nohup "$@" </dev/null >>"$LOGS/$name.log" 2>&1 &
    echo $! >"$PIDS/$name.pid"
  )
}

cmdline() { { tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null; }

# True when pid is a process of this test bed (its command line names the state folder).
ours() {
  local c
  c=$(cmdline "$1") || return 1
  case $c in *"$STATE/"* | *"$STATE "*) return 0 ;; *) return 1 ;; esac
}

# Pids of every component of this test bed: the pid files, plus any component process whose
# command line names this state folder (covers lost pid files). Excludes the reaper.
component_pids() {
  local f p exe
  {
    for f in "$PIDS"/*.pid; do
      [ -f "$f" ] || continue
      [ "$(basename "$f")" = reaper.pid ] && continue
      p=$(cat "$f" 2>/dev/null) || continue
      [ -n "$p" ] && ours "$p" && echo "$p"
    done
    for f in /proc/[0-9]*; do
      p=${f#/proc/}
      exe=$(readlink "$f/exe" 2>/dev/null) || continue
      case " $COMPONENT_EXES " in *" ${exe##*/} "*) ours "$p" && echo "$p" ;; esac
    done
  } | sort -un
}

# Looks up to $1 times, 0.2s apart, until none of the other pids given is alive; fails with
# the ones still alive in the caller's $left.
wait_gone() {
  local tries=$1 p i
  shift
  for i in $(seq "$tries"); do
    left=""
    for p in "$@"; do alive "$p" && left="$left $p"; done
    [ -z "$left" ] && return 0
    sleep 0.2
  done
  return 1
}

# TERM every pid given, KILL what is left after 10s.
stop_pids() {
  local left
  [ $# -gt 0 ] || return 0
  kill -TERM "$@" 2>/dev/null || true
  wait_gone 50 "$@" && return 0
  say "still running after 10s, sending KILL:$left"
  # shellcheck disable=SC2086
  kill -KILL $left 2>/dev/null || true
  wait_gone 25 "$@" && return 0
  say "could not stop:$left"
  return 1
}

reaper_pid() {
  local p
  p=$(cat "$PIDS/reaper.pid" 2>/dev/null) || return 1
  [ -n "$p" ] && alive "$p" && ours "$p" && echo "$p"
}

# Stops the components in dependency order (clients, then API servers, then etcd): an API
# server whose etcd is already gone hangs in its shutdown until KILLed. The real node's
# containers go after its kubelet (which would restart them) and before containerd; its mounts,
# iptables rules and bridge last (node_stop), before anyone deletes the state folder.
stop_components() {
  local tier n p pids all
  all=$(component_pids)
  for tier in "kubelet kube-proxy apiserver-relay kwok host-scheduler host-controller-manager virtual-controller-manager" \
    "containerd host-apiserver virtual-apiserver"; do
    pids=""
    for n in $tier; do
      p=$(cat "$PIDS/$n.pid" 2>/dev/null) || continue
      case " $(echo $all) " in *" $p "*) pids="$pids $p" ;; esac
    done
    if [ "$tier" != "${tier#containerd}" ]; then
      node_containers_stop "$(cat "$STATE/node-bin" 2>/dev/null || true)"
    fi
    # shellcheck disable=SC2086
    stop_pids $pids || return 1
  done
  # etcd, containerd's shims and anything found only by the /proc scan.
  pids=""
  for p in $all; do alive "$p" && pids="$pids $p"; done
  # shellcheck disable=SC2086
  stop_pids $pids || return 1
  node_stop "$(cat "$STATE/node-bin" 2>/dev/null || true)"
}

STATE_MARK=.vnest-testbed
# Deletes the state folder; refuses a folder that up.sh did not create (no marker file),
# so a mistyped VNEST_TESTBED_DIR cannot wipe unrelated files.
#   remove_state          everything but pki/ (the certificates are generated once and reused)
#   remove_state --purge  the whole folder
remove_state() {
  [ -e "$STATE" ] || return 0
  case $STATE in / | "$HOME" | /tmp | /root | /home | /work | "") echo "refusing to delete $STATE" >&2; return 1 ;; esac
  if [ ! -f "$STATE/$STATE_MARK" ] && [ -n "$(ls -A "$STATE" 2>/dev/null)" ]; then
    echo "refusing to delete $STATE: not a test-bed folder (no $STATE_MARK marker)" >&2
    return 1
  fi
  if [ "${1:-}" = --purge ] || [ ! -f "$PKI/.complete" ]; then
    rm -rf "$STATE"
  else
    find "$STATE" -mindepth 1 -maxdepth 1 ! -name pki ! -name "$STATE_MARK" -exec rm -rf {} +
  fi
}
