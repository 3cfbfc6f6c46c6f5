#!/usr/bin/env bash
# Builds and checks the sluice-manager, sluice-enforcer and sluice-ratelimit
# images with a container engine (make images, make verify-images).
#
#   hack/images.sh build     build the three images
#   hack/images.sh verify    run them: --version prints VERSION, user 65532
#   hack/images.sh verify-node
#                            import bin/images/*.tar (make node-images) into a
#                            containerd of its own, as the real node does, and
#                            run the enforcer and Redis from it (needs root)
#
# Environment (the Makefile sets it): VERSION, MANAGER_IMAGE, ENFORCER_IMAGE,
# RATELIMIT_IMAGE,
# CONTAINER_TOOL (docker or podman; empty: docker when its daemon answers,
# else podman, installed with apt-get when missing and running as root) and
# BINARIES: "prebuilt" (default) builds the static binaries on this machine
# and gives the Dockerfiles a context holding only them and the CA bundle,
# so nothing is pulled, not even a Go image; "build" compiles inside the
# Dockerfiles' Go image, as a CI that can pull does.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
: "${VERSION:?VERSION is not set}"
: "${MANAGER_IMAGE:=sluice-manager:$VERSION}"
: "${ENFORCER_IMAGE:=sluice-enforcer:$VERSION}"
: "${RATELIMIT_IMAGE:=sluice-ratelimit:$VERSION}"
: "${BINARIES:=prebuilt}"
tool="${CONTAINER_TOOL:-}"

install_podman() {
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "make images needs a container engine and found none that runs: install Docker or Podman" >&2
    echo "(then CONTAINER_TOOL=docker or CONTAINER_TOOL=podman), or build build/manager.Dockerfile and" >&2
    echo "build/enforcer.Dockerfile with your CI's tool. make node-images needs no engine." >&2
    exit 1
  fi
  echo ">> no container engine: installing Debian's podman and runc" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends podman runc >/dev/null
}

# pick_tool settles $tool on an engine that answers.
pick_tool() {
  case "$tool" in
  "")
    if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
      tool=docker
      return
    fi
    tool=podman
    command -v podman >/dev/null || install_podman
    ;;
  podman)
    command -v podman >/dev/null || install_podman
    ;;
  *)
    if ! command -v "$tool" >/dev/null || ! "$tool" info >/dev/null 2>&1; then
      echo "make images: '$tool' is not installed or its daemon is not running." >&2
      echo "Start it, or leave CONTAINER_TOOL empty to use Podman (installed with apt-get as root)." >&2
      exit 1
    fi
    ;;
  esac
}

# engine runs the engine; podman gets runc (crun does not run on every
# host's cgroups) and rlimits below the defaults it would otherwise ask for.
engine() {
  if [ "$tool" = podman ]; then
    local global=()
    command -v runc >/dev/null && global=(--runtime runc)
    local sub="$1"
    shift
    case "$sub" in
    build | run) podman "${global[@]}" "$sub" --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 "$@" ;;
    *) podman "${global[@]}" "$sub" "$@" ;;
    esac
  else
    "$tool" "$@"
  fi
}

build() {
  local name="$1" image="$2"
  local args=(-f "build/$name.Dockerfile" --build-arg "VERSION=$VERSION" -t "$image")
  if [ "$tool" = podman ]; then
    # Docker's builder sets these itself; podman leaves them empty.
    args+=(--build-arg "TARGETOS=$(go env GOOS)" --build-arg "TARGETARCH=$(go env GOARCH)")
  fi
  case "$BINARIES" in
  prebuilt)
    # No RUN step: no network, so the engine adds no firewall rules either.
    [ "$tool" = podman ] && args+=(--network none)
    engine build "${args[@]}" --build-arg BINARIES=prebuilt "bin/images/context/sluice-$name"
    ;;
  build)
    # Spelled out: Podman 4.3 (Debian 12's) skips the stage an ARG's
    # default names and then tries to pull it.
    engine build "${args[@]}" --build-arg BINARIES=build .
    ;;
  *)
    echo "BINARIES must be prebuilt or build, not '$BINARIES'" >&2
    exit 2
    ;;
  esac
}

# check IMAGE BINARY [ENTRYPOINT]: the image runs as 65532 and its binary
# (the entrypoint, or the one ENTRYPOINT names) prints VERSION.
check() {
  local image="$1" binary="$2" user got run=(--rm)
  local want="$binary $VERSION"
  [ "$tool" = podman ] && run+=(--network none)
  [ -n "${3:-}" ] && run+=(--entrypoint "$3")
  user="$(engine inspect --format '{{.Config.User}}' "$image")"
  if [ "$user" != 65532:65532 ]; then
    echo "FAIL $image runs as '$user', want 65532:65532" >&2
    return 1
  fi
  got="$(engine run "${run[@]}" "$image" --version)"
  if [ "$got" != "$want" ]; then
    echo "FAIL $image --version printed '$got', want '$want'" >&2
    return 1
  fi
  echo "ok   $image: user $user, --version '$got'"
}

# verify_node imports every archive into a containerd of its own (root,
# state and socket in a temporary directory, CRI off), as the real node's
# harness does, and runs the enforcer and Redis from it. --cgroup "": runc
# puts each in a cgroup of its own name and removes it, leaving no parent.
verify_node() {
  if ! command -v containerd >/dev/null || ! command -v ctr >/dev/null; then
    if [ "$(id -u)" -ne 0 ]; then
      echo "verify-node needs containerd and ctr, and root" >&2
      exit 1
    fi
    echo ">> installing Debian's containerd and runc" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends containerd runc >/dev/null
  fi
  ctd_dir="$(mktemp -d /tmp/sluice-images-ctd.XXXXXX)"
  printf '%s\n' 'version = 2' "root = \"$ctd_dir/root\"" "state = \"$ctd_dir/state\"" \
    'disabled_plugins = ["io.containerd.grpc.v1.cri"]' \
    '[grpc]' "  address = \"$ctd_dir/containerd.sock\"" \
    '[ttrpc]' "  address = \"$ctd_dir/containerd.sock.ttrpc\"" >"$ctd_dir/config.toml"
  containerd --config "$ctd_dir/config.toml" >"$ctd_dir/containerd.log" 2>&1 &
  ctd_pid=$!
  trap stop_containerd EXIT
  local ctr=(ctr -a "$ctd_dir/containerd.sock" -n k8s.io) archive ref enforcer redis got
  for _ in $(seq 100); do
    "${ctr[@]}" version >/dev/null 2>&1 && break
    kill -0 "$ctd_pid" 2>/dev/null || { cat "$ctd_dir/containerd.log" >&2; return 1; }
    sleep 0.1
  done
  for archive in bin/images/*.tar; do
    ref="$("${ctr[@]}" images import "$archive" | sed -n 's/^unpacking \([^ ]*\) .*/\1/p')"
    if [ -z "$ref" ]; then
      echo "FAIL ctr images import $archive named no image" >&2
      return 1
    fi
    echo "ok   $archive imported as $ref"
  done
  enforcer="$("${ctr[@]}" images ls -q | grep '/sluice-enforcer:')"
  redis="$("${ctr[@]}" images ls -q | grep '/sluice-redis:')"
  got="$("${ctr[@]}" run --rm --cgroup "" "$enforcer" sluice-images-enforcer /sluice-enforcer --version)"
  if [ "$got" != "sluice-enforcer $VERSION" ]; then
    echo "FAIL $enforcer --version printed '$got'" >&2
    return 1
  fi
  echo "ok   $enforcer runs: $got"
  got="$("${ctr[@]}" run --rm --cgroup "" "$redis" sluice-images-redis redis-server --version)"
  echo "ok   $redis runs: $got"
}

# stop_containerd stops the containerd verify_node started, by its PID, and
# removes its directory.
stop_containerd() {
  kill "$ctd_pid" 2>/dev/null || true
  while kill -0 "$ctd_pid" 2>/dev/null; do sleep 0.1; done
  rm -rf "$ctd_dir"
}

case "${1:-}" in
verify-node)
  verify_node
  exit
  ;;
esac
pick_tool
case "${1:-}" in
build)
  if [ "$BINARIES" = prebuilt ]; then
    go run ./hack/images contexts --out bin/images/context --version "$VERSION" sluice-manager sluice-enforcer sluice-ratelimit >/dev/null
  fi
  build manager "$MANAGER_IMAGE"
  build enforcer "$ENFORCER_IMAGE"
  build ratelimit "$RATELIMIT_IMAGE"
  echo "built $MANAGER_IMAGE, $ENFORCER_IMAGE and $RATELIMIT_IMAGE with $tool"
  ;;
verify)
  check "$MANAGER_IMAGE" sluice-manager
  check "$ENFORCER_IMAGE" sluice-enforcer
  check "$ENFORCER_IMAGE" sluice-policy-compile /sluice-policy-compile
  check "$RATELIMIT_IMAGE" sluice-ratelimit
  ;;
*)
  echo "usage: $0 build|verify|verify-node" >&2
  exit 2
  ;;
esac
