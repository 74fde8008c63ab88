#!/usr/bin/env bash
# Builds the container images the real node runs — offline, from this workspace's and the bed's
# binaries — as one-layer OCI archives, and imports them into the bed's containerd. Nothing is
# pulled: every image the node needs is one of these. Idempotent: an image whose manifest is
# already in containerd is not imported again.
#
#   images.sh            build and import every image (the bed must be up: up.sh)
#   images.sh bed        only the images of the bed's own binaries (up.sh runs this; the
#                        workspace's images follow once `cargo build` has made its binaries)
#   images.sh only REF.. only the images of these references (a test importing just its own)
#   images.sh e2e        only the images the Kubernetes end-to-end tests run that can be built
#                        here (agnhost from build-e2e.sh, pause, the sample-apiserver) and the
#                        stand-ins for those that cannot (see e2e_images);
#                        hack/conformance.sh imports them
#   images.sh --list     print "<reference> <entrypoint> <user> <files>" of every image, one a
#                        line, building nothing (files: <BED|NODE|CARGO|E2E>/<binary>:<path>
#                        or LINK/<target>:<path>, comma-separated)
#
# VNEST_SYNCER_IMAGE=REF imports the syncer under REF instead: a test that runs its operator with
# --syncer-image=REF keeps its own build even when another worktree imports the shared tag.
#
# The Dockerfiles under images/ stay the release recipe; tests/tests/images.rs checks that the
# local images and the Dockerfiles agree on binary, entrypoint and user.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
# shellcheck source=versions.env
source "$here/versions.env"
# shellcheck source=node/versions.env
source "$here/node/versions.env"
# shellcheck source=addons.env
source "$here/addons.env"

workspace_version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | head -n1)
target_dir=${CARGO_TARGET_DIR:-$repo/target}/${VNEST_IMAGE_PROFILE:-debug}

# reference | user | entrypoint (JSON) | cmd (JSON) | files: <bin-dir-var>/<name>:<path in image> ...
# bin-dir vars: BED (build.sh), NODE (build-node.sh), ADDONS (build-addons.sh), CARGO (the
# workspace's build), E2E (build-e2e.sh). CoreDNS stands in for the public image vnest deploys
# by default, under its reference, entrypoint and (nonroot) user.
IMAGES=(
  "registry.k8s.io/pause:3.10|65535:65535|[\"/pause\"]|[]|NODE/pause:/pause"
  "ghcr.io/vnest-dev/vnest-echo:$workspace_version|65532:65532|[\"/usr/local/bin/vnest-echo\"]|[\"serve\"]|NODE/vnest-echo:/usr/local/bin/vnest-echo"
  "${VNEST_SYNCER_IMAGE:-ghcr.io/vnest-dev/vnest-syncer:$workspace_version}|65532:65532|[\"/usr/local/bin/vnest-syncer\"]|[]|CARGO/vnest-syncer:/usr/local/bin/vnest-syncer"
  "ghcr.io/vnest-dev/vnest-operator:$workspace_version|65532:65532|[\"/usr/local/bin/vnest-operator\"]|[]|CARGO/vnest-operator:/usr/local/bin/vnest-operator"
  "ghcr.io/vnest-dev/kubernetes:$KUBERNETES_VERSION|65532:65532|[]|[]|BED/kube-apiserver:/usr/local/bin/kube-apiserver BED/kube-controller-manager:/usr/local/bin/kube-controller-manager NODE/kine:/usr/local/bin/kine"
  "registry.k8s.io/etcd:${ETCD_VERSION#v}-0|65532:65532|[]|[]|BED/etcd:/usr/local/bin/etcd"
  "registry.k8s.io/coredns/coredns:$COREDNS_VERSION|65532:65532|[\"/coredns\"]|[]|ADDONS/coredns:/coredns"
)

# The end-to-end tests' images that can be built here, under the references the e2e framework
# asks for (k8s.io/kubernetes/test/utils/image/manifest.go); imported only by `images.sh e2e`.
# pause and the sample-apiserver are the bed's own builds (pause from the node's containerd
# build, k8s.io/sample-apiserver at the bed's version) under the e2e suite's tags. Stand-ins, so
# that specs needing only a shell, a previous agnhost or a web server run rather than wait out
# their timeouts: u-root's commands (build-e2e.sh) under busybox's tag; agnhost with its image's
# certificate and those commands (its real image is Alpine, with the shell and netcat specs exec
# into), also under the previous agnhost's tag (rolling updates from it); and agnhost serving
# HTTP on port 80 (`netexec`) under the nginx tags; dig and getent (dnstools/) join those commands
# in agnhost and make, with them, the glibc-dns-testing image of the DNS specs. A spec needing what a stand-in lacks (an
# option u-root's commands do not have, nginx itself) fails on the host and in the virtual
# cluster alike.
e2e_images() { # e2e bin dir
  local manifest
  manifest="$(cd "$here/e2e" && GOTOOLCHAIN=local go list -m -f '{{.Dir}}' k8s.io/kubernetes)/test/utils/image/manifest.go"
  tag() { sed -n "s/.*configs\[$1\] = Config{[^,]*, \"[^\"]*\", \"\([^\"]*\)\"}.*/\1/p" "$manifest"; }
  local busybox="" dnstools="" command agnhost
  for command in "$1"/busybox/*; do
    busybox+=" E2E/busybox/${command##*/}:/bin/${command##*/}"
  done
  for command in "$1"/dnstools/*; do
    dnstools+=" E2E/dnstools/${command##*/}:/usr/bin/${command##*/}"
  done
  echo "registry.k8s.io/e2e-test-images/busybox:$(tag BusyBox)|0:0|[]|[\"sh\"]|${busybox# }"
  echo "registry.k8s.io/e2e-test-images/glibc-dns-testing:$(tag GlibcDnsTesting)|0:0|[]|[\"sh\"]|${busybox# }$dnstools"
  # agnhost's real image is Alpine with a shell, netcat and dig, which specs exec into.
  agnhost="E2E/agnhost:/agnhost LINK/agnhost:/agnhost-2 E2E/localhost.crt:/localhost.crt E2E/localhost.key:/localhost.key$busybox$dnstools"
  echo "registry.k8s.io/e2e-test-images/agnhost:$(cat "$1/agnhost.version")|0:0|[\"/agnhost\"]|[\"pause\"]|$agnhost"
  echo "registry.k8s.io/e2e-test-images/agnhost:$(tag AgnhostPrev)|0:0|[\"/agnhost\"]|[\"pause\"]|$agnhost"
  for nginx in Nginx NginxNew; do
    echo "registry.k8s.io/e2e-test-images/nginx:$(tag $nginx)|0:0|[\"/agnhost\"]|[\"netexec\",\"--http-port=80\"]|E2E/agnhost:/agnhost"
  done
  echo "registry.k8s.io/pause:3.10.2|65535:65535|[\"/pause\"]|[]|NODE/pause:/pause"
  echo "registry.k8s.io/e2e-test-images/sample-apiserver:1.29.2|0:0|[\"/sample-apiserver\"]|[]|BED/sample-apiserver:/sample-apiserver"
}

if [ "${1:-}" = --list ]; then
  for spec in "${IMAGES[@]}"; do
    IFS='|' read -r ref user entrypoint _ files <<<"$spec"
    echo "$ref $entrypoint $user ${files// /,}"
  done
  exit 0
fi

BED=$(bash "$here/build.sh")
NODE=$(bash "$here/build-node.sh")
ADDONS=$(bash "$here/build-addons.sh")
CARGO=$target_dir
E2E=""
case ${1:-} in
  "" | bed | only) ;;
  e2e)
    E2E=$(bash "$here/build-e2e.sh")
    mapfile -t IMAGES < <(e2e_images "$E2E")
    ;;
  *) echo "images.sh: unknown argument: $1 (see the header)" >&2; exit 2 ;;
esac
SOCK="$STATE/containerd/containerd.sock"
[ -S "$SOCK" ] || { echo "images.sh: containerd is not running ($SOCK missing): start the bed with up.sh" >&2; exit 1; }
ctr() { "$NODE/ctr" --address "$SOCK" --namespace k8s.io "$@"; }
out="$STATE/images"
mkdir -p "$out"
say() { echo "[testbed images] $*" >&2; }

# Copies FILE into ROOT at PATH, with every shared library it links (as ldd resolves them) at the
# same path, so a dynamically linked binary runs in an image with no distribution inside. A
# workspace binary loses its debug sections on the way (a debug syncer is ~450 MB, ~40 MB
# without them; its symbols stay, so panics still name functions): every image is stored four
# times over (archive, blob, containerd's content store and snapshot).
add_file() { # root src dst strip-debug(yes|no)
  local root=$1 src=$2 dst=$3 strip=$4 lib
  [ -f "$src" ] || { echo "images.sh: $src is missing (build it first: cargo build --workspace --bins)" >&2; exit 1; }
  mkdir -p "$root$(dirname "$dst")"
  if [ "$strip" = yes ]; then
    objcopy --strip-debug "$src" "$root$dst"
  else
    cp -L "$src" "$root$dst"
  fi
  if ldd "$src" >/dev/null 2>&1; then
    for lib in $(ldd "$src" | grep -o '/[^ ]*'); do
      mkdir -p "$root$(dirname "$lib")"
      cp -L "$lib" "$root$lib"
    done
  fi
}

sha() { sha256sum "$1" | cut -d' ' -f1; }

# Writes the OCI archive of one image to $out/<slug>.tar; prints its manifest digest.
build_image() { # ref user entrypoint cmd files
  local ref=$1 user=$2 entrypoint=$3 cmd=$4 files=$5 root f src dst strip
  work=$(mktemp -d)
  # build_image runs in a subshell: its scratch (a global, so the trap still sees it) goes
  # however the subshell ends, a full disk included.
  trap 'rm -rf "$work"' EXIT
  root=$work/rootfs
  mkdir -p "$root/tmp" "$root/etc" "$work/oci/blobs/sha256"
  chmod 1777 "$root/tmp"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' >"$root/etc/group"
  for f in $files; do
    src=${f%%:*} dst=${f#*:} strip=no
    case $src in
      BED/*) src=$BED/${src#BED/} ;;
      NODE/*) src=$NODE/${src#NODE/} ;;
      ADDONS/*) src=$ADDONS/${src#ADDONS/} ;;
      CARGO/*) src=$CARGO/${src#CARGO/} strip=yes ;;
      E2E/*) src=$E2E/${src#E2E/} ;;
      LINK/*) ln -s "${src#LINK/}" "$root$dst" && continue ;;
    esac
    add_file "$root" "$src" "$dst" "$strip"
  done
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$root" -cf "$work/layer.tar" .
  local layer layer_size config config_size manifest manifest_size
  layer=$(sha "$work/layer.tar") layer_size=$(stat -c %s "$work/layer.tar")
  mv "$work/layer.tar" "$work/oci/blobs/sha256/$layer"
  printf '{"architecture":"amd64","os":"linux","config":{"User":"%s","Entrypoint":%s,"Cmd":%s,"Env":["PATH=/usr/local/bin:/usr/bin:/bin"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$user" "$entrypoint" "$cmd" "$layer" >"$work/config.json"
  config=$(sha "$work/config.json") config_size=$(stat -c %s "$work/config.json")
  mv "$work/config.json" "$work/oci/blobs/sha256/$config"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
    "$config" "$config_size" "$layer" "$layer_size" >"$work/manifest.json"
  manifest=$(sha "$work/manifest.json") manifest_size=$(stat -c %s "$work/manifest.json")
  mv "$work/manifest.json" "$work/oci/blobs/sha256/$manifest"
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$manifest" "$manifest_size" "$ref" "${ref##*:}" >"$work/oci/index.json"
  echo '{"imageLayoutVersion":"1.0.0"}' >"$work/oci/oci-layout"
  local archive
  archive="$out/$(echo "$ref" | tr '/:' '__').tar"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$work/oci" -cf "$archive" oci-layout index.json blobs
  rm -rf "$work"
  echo "sha256:$manifest $archive"
}

for spec in "${IMAGES[@]}"; do
  IFS='|' read -r ref user entrypoint cmd files <<<"$spec"
  if [ "${1:-}" = bed ] && [ "$files" != "${files#*CARGO/}" ]; then continue; fi
  if [ "${1:-}" = only ] && ! printf '%s\n' "${@:2}" | grep -qxF "$ref"; then continue; fi
  read -r digest archive < <(build_image "$ref" "$user" "$entrypoint" "$cmd" "$files")
  if ctr images ls -q "name==$ref" 2>/dev/null | grep -qx "$ref" &&
    [ "$(ctr images ls "name==$ref" | awk 'NR == 2 { print $3 }')" = "$digest" ]; then
    continue
  fi
  say "importing $ref ($digest)"
  ctr images import --local "$archive" >/dev/null ||
    { echo "images.sh: importing $archive into containerd failed" >&2; exit 1; }
done
say "images ready in containerd ($SOCK)"
