#!/usr/bin/env bash
# Stops every test-bed process (TERM, KILL after 10s) and deletes the state folder
# ${VNEST_TESTBED_DIR:-/tmp/vnest-testbed} except its pki/ (certificates are generated once
# and reused by the next up.sh). Idempotent: a bed that is not up is a no-op.
#   --purge        delete pki/ too (the whole folder)
#   --from-reaper  (internal) run by the owner-pid reaper; does nothing when that reaper was
#                  replaced in the meantime by a newer up.sh --owner-pid.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

from_reaper=0 purge=""
for a in "$@"; do
  case $a in
    --from-reaper) from_reaper=1 ;;
    --purge) purge=--purge ;;
    *) echo "down.sh: unknown argument: $a" >&2; exit 2 ;;
  esac
done

mkdir -p "$(dirname "$STATE")"
exec 9>"$LOCK"
if ! flock -w 600 9; then
  echo "down.sh: timed out after 600s waiting for the lock $LOCK" >&2
  exit 1
fi

if [ "$from_reaper" = 1 ]; then
  # exec'd by the reaper: same pid as the one recorded, unless a newer reaper replaced it.
  if [ "$(cat "$PIDS/reaper.pid" 2>/dev/null || true)" != "$$" ]; then
    say "reaper $$ was replaced; leaving the test bed up"
    exit 0
  fi
  rm -f "$PIDS/reaper.pid"
else
  reaper=$(reaper_pid) || reaper=""
  if [ -n "$reaper" ]; then stop_pids "$reaper"; fi
fi

pids=$(component_pids)
if [ -n "$pids" ]; then
  say "stopping $(echo "$pids" | wc -l) test-bed processes"
  stop_components
fi
remove_state $purge
