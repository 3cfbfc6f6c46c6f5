#!/usr/bin/env bash
# Builds the envtest control plane into DIR (default ./bin/k8s), the directory
# that KUBEBUILDER_ASSETS points at: etcd and kube-apiserver from source, since
# no prebuilt envtest binaries can be downloaded, plus a link to the system
# kubectl.
#
#   hack/envtest.sh [DIR]
#   hack/envtest.sh node [DIR]
#
# The second form builds the rest of a real cluster for the real-node tier
# (internal/testing/node, test/node) into DIR (default ./bin/node): kubelet,
# kube-proxy, kube-controller-manager and kube-scheduler, from
# hack/envtest/node, pinned to the same release as kube-apiserver. It needs
# no kubectl link and shares the build and stamp logic (hack/lib/pinned.sh).
#
# Each binary is built from its own module under hack/envtest/ (pinned there,
# with a committed go.sum) and is rebuilt only when that module changes: a
# stamp file next to the binary records the version and a hash of go.mod and
# go.sum. A cached run takes well under a second; the first kube-apiserver
# build takes several minutes on two cores.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target=envtest
if [ "${1:-}" = node ]; then
  target=node
  shift
fi
dir="${1:-$root/bin/$([ "$target" = node ] && echo node || echo k8s)}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

# shellcheck source=hack/lib/pinned.sh
source "$root/hack/lib/pinned.sh"
lock_dir

# version_ldflags VERSION: the release stamped into a Kubernetes binary, as a
# release build does: clients such as helm read it from /version to check
# their Kubernetes version constraints, and the kubelet reports it as the
# node's version.
version_ldflags() {
  local major="${1#v}" minor="${1#v*.}"
  major="${major%%.*}"
  minor="${minor%%.*}"
  echo "-s -w \
  -X k8s.io/component-base/version.gitVersion=$1 \
  -X k8s.io/component-base/version.gitMajor=$major \
  -X k8s.io/component-base/version.gitMinor=$minor \
  -X k8s.io/component-base/version.gitTreeState=clean"
}

if [ "$target" = node ]; then
  node_mod="$root/hack/envtest/node"
  node_version="$(module_version "$node_mod" k8s.io/kubernetes)"
  api_version="$(module_version "$root/hack/envtest/kube-apiserver" k8s.io/kubernetes)"
  if [ "$node_version" != "$api_version" ]; then
    echo "error: hack/envtest/node pins k8s.io/kubernetes $node_version, kube-apiserver $api_version: bump both" >&2
    exit 1
  fi
  # The first build compiles most of k8s.io/kubernetes once; the other three
  # reuse the build cache and mostly link.
  for name in kubelet kube-proxy kube-controller-manager kube-scheduler; do
    build "$name" "$node_mod" "k8s.io/kubernetes/cmd/$name" "$node_version" -ldflags "$(version_ldflags "$node_version")"
  done
  exit 0
fi

etcd_mod="$root/hack/envtest/etcd"
etcd_version="$(module_version "$etcd_mod" go.etcd.io/etcd/server/v3)"
build etcd "$etcd_mod" go.etcd.io/etcd/server/v3 "$etcd_version" -ldflags "-s -w"

kube_mod="$root/hack/envtest/kube-apiserver"
kube_version="$(module_version "$kube_mod" k8s.io/kubernetes)"
build kube-apiserver "$kube_mod" k8s.io/kubernetes/cmd/kube-apiserver "$kube_version" -ldflags "$(version_ldflags "$kube_version")"

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
