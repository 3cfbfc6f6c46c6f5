#!/usr/bin/env bash
# Makes sure redis-server, redis-cli and redis-benchmark are on PATH.
# The tests start their own servers on free loopback ports; this only installs.
set -euo pipefail

if command -v redis-server >/dev/null && command -v redis-cli >/dev/null && command -v redis-benchmark >/dev/null; then
  exit 0
fi

echo ">> redis-server not found: installing Debian's redis-server and redis-tools" >&2
if ! command -v apt-get >/dev/null; then
  echo "error: apt-get is not available; install redis-server (>= 6.2) yourself and re-run" >&2
  exit 1
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends redis-server redis-tools >/dev/null
# The package starts a system-wide server on :6379; the tests never use it.
if command -v systemctl >/dev/null && systemctl is-active --quiet redis-server 2>/dev/null; then
  $sudo systemctl stop redis-server || true
fi
redis-server --version >&2
