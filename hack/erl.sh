#!/usr/bin/env bash
# Builds envoyproxy/ratelimit (ERL), the reference implementation of Envoy's
# rate limit service, into DIR (default ./bin/erl) as DIR/ratelimit: the peer
# that the differential tests run next to Sluice's own rate limit service
# (internal/testing/erlpeer starts it).
#
#   hack/erl.sh [DIR]
#
# It is built from its module, hack/erl (pinned there, with a committed
# go.sum), and rebuilt only when that module changes. A cached run takes well
# under a second; the first build takes a few minutes on two cores.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-$root/bin/erl}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

# shellcheck source=hack/lib/pinned.sh
source "$root/hack/lib/pinned.sh"
lock_dir

mod="$root/hack/erl"
build ratelimit "$mod" github.com/envoyproxy/ratelimit/src/service_cmd \
  "$(module_version "$mod" github.com/envoyproxy/ratelimit)" -ldflags "-s -w"
