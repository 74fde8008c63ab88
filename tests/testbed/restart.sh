#!/usr/bin/env bash
# Kills one component of the running test bed with SIGKILL (as a crash would) and starts it
# again with the same command line and environment; the fault suite uses it to restart the
# host API server or etcd under work in flight. Returns once the new process runs (not once
# it is ready: the caller waits for what it needs).
#
#   restart.sh NAME   NAME as in $STATE/pids: etcd, host-apiserver, virtual-apiserver, ...
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

name=${1:?usage: restart.sh NAME (a component of the bed, as in $PIDS)}
pid=$(cat "$PIDS/$name.pid" 2>/dev/null) || { echo "restart.sh: no component '$name' in $PIDS" >&2; exit 2; }
alive "$pid" && ours "$pid" || { echo "restart.sh: '$name' (pid $pid) is not running" >&2; exit 1; }

mapfile -d '' command <"/proc/$pid/cmdline"
mapfile -d '' environment <"/proc/$pid/environ"
# A killed Go process's leader thread turns zombie before its other threads have exited and
# closed its sockets: wait until no thread is left, or the new process finds its port taken.
threads() { find "/proc/$pid/task" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
kill -KILL "$pid"
for _ in $(seq 1 100); do
  [ "$(threads)" -le 1 ] && ! alive "$pid" && break
  sleep 0.1
done
alive "$pid" && { echo "restart.sh: '$name' (pid $pid) survived SIGKILL for 10 s" >&2; exit 1; }
for attempt in 1 2 3; do
  launch "$name" env -i "${environment[@]}" "${command[@]}"
  new=$(cat "$PIDS/$name.pid")
  sleep 2
  if alive "$new"; then
    say "restarted $name (was pid $pid, now $new)"
    exit 0
  fi
  say "restart $attempt of $name exited at once; see $LOGS/$name.log"
done
echo "restart.sh: '$name' did not stay up after 3 starts; see $LOGS/$name.log" >&2
exit 1
