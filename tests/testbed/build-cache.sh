# Shared by the build*.sh scripts; source it, do not run it. Each build fills one folder of
# ${VNEST_TESTBED_CACHE:-~/.cache/vnest-testbed} named <name>-<key>, the key a hash of every file
# the build depends on (this one included); a complete folder is reused as is.

export GOTOOLCHAIN=local GOFLAGS=-modcacherw

# Progress, on stderr (stdout carries the folder), named after the calling script.
log() { echo "[testbed $(basename "$0" .sh)] $*" >&2; }

# Sets $bin to the folder of build NAME keyed by FILE... and creates it; when that folder is
# complete already, prints it and ends the calling script.
build_folder() { # name file...
  local name=$1 key
  shift
  key=$(cat "$@" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-16)
  bin="${VNEST_TESTBED_CACHE:-$HOME/.cache/vnest-testbed}/$name-$key"
  if [ -f "$bin/.complete" ]; then
    echo "$bin"
    exit 0
  fi
  mkdir -p "$bin"
  build_started=$(date +%s)
}

# Marks $bin complete and prints it.
build_done() {
  touch "$bin/.complete"
  log "done in $(($(date +%s) - build_started))s: $bin"
  echo "$bin"
}
