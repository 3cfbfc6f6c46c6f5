#!/usr/bin/env bash
# Builds the envtest control plane into DIR (default ./bin/k8s), the directory
# that KUBEBUILDER_ASSETS points at: etcd and kube-apiserver from source, since
# no prebuilt envtest binaries can be downloaded, plus a link to the system
# kubectl.
#
#   hack/envtest.sh [DIR]
#
# Each binary is built from its own module under hack/envtest/ (pinned there,
# with a committed go.sum) and is rebuilt only when that module changes: a
# stamp file next to the binary records the version and a hash of go.mod and
# go.sum. A cached run takes well under a second; the first kube-apiserver
# build takes several minutes on two cores.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-$root/bin/k8s}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

# Static binaries, no VCS stamp (the code comes from module zips, not from this
# checkout), and no go.work from around the repo.
export CGO_ENABLED=0 GOWORK=off

# Two runs at once (parallel make, two terminals) would build the same binary
# twice; the second waits for the first and then finds it up to date.
if command -v flock >/dev/null; then
  exec 9>"$dir/.lock"
  flock 9
fi

# module_version MODDIR MODULE prints the version of MODULE required in
# MODDIR/go.mod. Reads the file instead of asking go, which keeps cached runs
# fast and offline.
module_version() {
  awk -v mod="$2" '$1 !~ /^\/\// && $0 !~ /=>/ { for (i = 1; i < NF; i++) if ($i == mod) { print $(i + 1); exit } }' "$1/go.mod"
}

# build NAME MODDIR PACKAGE VERSION [go build flags...] builds PACKAGE from
# the module in MODDIR into $dir/NAME unless the stamp says it is current.
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
  echo ">> building $name $version (first time takes several minutes)"
  local start=$SECONDS
  # Build next to the target and rename, so an interrupted build never leaves
  # a binary that a later run would take for a finished one.
  rm -f "$stamp"
  go build -C "$moddir" -trimpath -buildvcs=false "$@" -o "$out.tmp" "$pkg"
  mv -f "$out.tmp" "$out"
  echo "$want" >"$stamp"
  echo ">> built $name $version in $((SECONDS - start))s ($out)"
}

etcd_mod="$root/hack/envtest/etcd"
etcd_version="$(module_version "$etcd_mod" go.etcd.io/etcd/server/v3)"
build etcd "$etcd_mod" go.etcd.io/etcd/server/v3 "$etcd_version" -ldflags "-s -w"

kube_mod="$root/hack/envtest/kube-apiserver"
kube_version="$(module_version "$kube_mod" k8s.io/kubernetes)"
kube_minor="${kube_version#v*.}"
kube_minor="${kube_minor%%.*}"
kube_major="${kube_version#v}"
kube_major="${kube_major%%.*}"
# Stamp the release into the binary, as a release build does: clients such as
# helm read it from /version to check their Kubernetes version constraints.
build kube-apiserver "$kube_mod" k8s.io/kubernetes/cmd/kube-apiserver "$kube_version" -ldflags "-s -w \
  -X k8s.io/component-base/version.gitVersion=$kube_version \
  -X k8s.io/component-base/version.gitMajor=$kube_major \
  -X k8s.io/component-base/version.gitMinor=$kube_minor \
  -X k8s.io/component-base/version.gitTreeState=clean"

# envtest looks for kubectl in the same directory, and the envtest suites run
# it (server-side apply, kubectl wait, printer columns, apply -k): they fail
# without it. DIR may itself be on PATH: never link kubectl to itself.
if kubectl="$(command -v kubectl)" && [ "$kubectl" != "$dir/kubectl" ]; then
  if [ "$(readlink "$dir/kubectl" 2>/dev/null)" != "$kubectl" ]; then
    ln -sfn "$kubectl" "$dir/kubectl"
    echo ">> linked $dir/kubectl -> $kubectl"
  fi
elif [ ! -e "$dir/kubectl" ]; then
  echo ">> kubectl not found on PATH: the envtest suites need it; install kubectl" >&2
fi
