#!/usr/bin/env bash
# Makes sure the real-node tier (internal/testing/node, test/node) finds what it
# runs besides the binaries hack/envtest.sh builds: containerd, runc, the
# CNI plugins (bridge, host-local, loopback), iptables and conntrack for
# kube-proxy, and nft to remove the empty tables iptables-nft leaves. The
# harness runs containerd with a configuration of its own; this only installs.
set -euo pipefail

missing=()
for cmd in containerd ctr runc iptables conntrack nft; do
  command -v "$cmd" >/dev/null || missing+=("$cmd")
done
[ -x /usr/lib/cni/bridge ] || [ -x /opt/cni/bin/bridge ] || missing+=(cni-plugins)
if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi

echo ">> not found: ${missing[*]}: installing Debian's containerd, runc, containernetworking-plugins, iptables, conntrack and nftables" >&2
if ! command -v apt-get >/dev/null; then
  echo "error: apt-get is not available; install containerd 1.6+, runc, the CNI plugins, iptables, conntrack and nft yourself" >&2
  exit 1
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends containerd runc containernetworking-plugins iptables conntrack nftables >/dev/null
# The package starts a system-wide containerd on /run/containerd; the
# harness never uses it.
if command -v systemctl >/dev/null && systemctl is-active --quiet containerd 2>/dev/null; then
  $sudo systemctl stop containerd || true
fi
containerd --version >&2
