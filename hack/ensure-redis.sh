#!/usr/bin/env bash
# Makes sure redis-server, redis-cli and redis-benchmark are on PATH, and
# libfaketime (Debian's faketime), under which some tests run a Redis whose
# clock is set to a chosen date (redistest.WithClockAt).
# The tests start their own servers on free loopback ports; this only installs.
set -euo pipefail

have_faketime() {
  compgen -G '/usr/lib/*/faketime/libfaketime.so.1' >/dev/null ||
    [ -e /usr/lib/faketime/libfaketime.so.1 ] || [ -e /usr/local/lib/faketime/libfaketime.so.1 ]
}

packages=()
if ! { command -v redis-server >/dev/null && command -v redis-cli >/dev/null && command -v redis-benchmark >/dev/null; }; then
  packages+=(redis-server redis-tools)
fi
have_faketime || packages+=(faketime)
if [ ${#packages[@]} -eq 0 ]; then exit 0; fi

echo ">> installing Debian's ${packages[*]}" >&2
if ! command -v apt-get >/dev/null; then
  echo "error: apt-get is not available; install ${packages[*]} (redis-server >= 6.2, libfaketime) yourself and re-run" >&2
  exit 1
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
# The package starts a system-wide server on :6379; the tests never use it.
if command -v systemctl >/dev/null && systemctl is-active --quiet redis-server 2>/dev/null; then
  $sudo systemctl stop redis-server || true
fi
redis-server --version >&2
