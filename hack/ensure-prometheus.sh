#!/usr/bin/env bash
# Makes sure prometheus and promtool are on PATH: the monitoring tests run
# promtool on the chart's alert rules and a Prometheus of their own (on a
# free loopback port, with its own data directory) that scrapes the real
# components. This only installs.
set -euo pipefail

if command -v prometheus >/dev/null && command -v promtool >/dev/null; then
  exit 0
fi

echo ">> prometheus not found: installing Debian's prometheus" >&2
if ! command -v apt-get >/dev/null; then
  echo "error: apt-get is not available; install prometheus and promtool (>= 2.42) yourself and re-run" >&2
  exit 1
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null
# The package starts a system-wide server on :9090 (through systemd, or its
# init script where policy-rc.d allows); the tests never use it.
if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
  $sudo systemctl stop prometheus || true
  $sudo systemctl disable prometheus >/dev/null 2>&1 || true
elif [ -x /etc/init.d/prometheus ] && /etc/init.d/prometheus status >/dev/null 2>&1; then
  $sudo /etc/init.d/prometheus stop || true
fi
prometheus --version 2>&1 | head -1 >&2
