# Helpers the scripts that build pinned binaries share (hack/envtest.sh,
# hack/erl.sh): each binary comes from a module of its own under hack/, with
# a committed go.sum, and is rebuilt only when that module changes. Source it
# after setting $dir, the folder the binaries go to.

# shellcheck shell=bash

# Static binaries, no VCS stamp (the code comes from module zips, not from this
# checkout), and no go.work from around the repo.
export CGO_ENABLED=0 GOWORK=off

# module_version MODDIR MODULE prints the version of MODULE required in
# MODDIR/go.mod. Reads the file instead of asking go, which keeps cached runs
# fast and offline.
module_version() {
  awk -v mod="$2" '$1 !~ /^\/\// && $0 !~ /=>/ { for (i = 1; i < NF; i++) if ($i == mod) { print $(i + 1); exit } }' "$1/go.mod"
}

# lock_dir waits for any other run building into $dir (parallel make, two
# terminals), which then finds its binaries up to date.
lock_dir() {
  if command -v flock >/dev/null; then
    exec 9>"$dir/.lock"
    flock 9
  fi
}

# build NAME MODDIR PACKAGE VERSION [go build flags...] builds PACKAGE from
# the module in MODDIR into $dir/NAME unless the stamp says it is current: a
# stamp file next to the binary records the version and a hash of go.mod and
# go.sum.
build() {
  local name="$1" moddir="$2" pkg="$3" version="$4"
  shift 4
  local out="$dir/$name" stamp="$dir/.$name.stamp" want
  if [ -z "$version" ]; then
    echo "error: cannot read the pinned version of $name from $moddir/go.mod" >&2
    exit 1
  fi
  want="$name $version $(cat "$moddir/go.mod" "$moddir/go.sum" | sha256sum | cut -d' ' -f1) $*"
  if [ -x "$out" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo ">> $name $version is up to date ($out)"
    return
  fi
  echo ">> building $name $version (first time takes minutes)"
  local start=$SECONDS
  # Build next to the target and rename, so an interrupted build never leaves
  # a binary that a later run would take for a finished one.
  rm -f "$stamp"
  go build -C "$moddir" -trimpath -buildvcs=false "$@" -o "$out.tmp" "$pkg"
  mv -f "$out.tmp" "$out"
  echo "$want" >"$stamp"
  echo ">> built $name $version in $((SECONDS - start))s ($out)"
}
