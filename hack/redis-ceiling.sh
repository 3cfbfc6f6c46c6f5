#!/usr/bin/env bash
# The ceiling for the limiter benchmarks: redis-benchmark running the token
# bucket script through EVALSHA against its own local redis-server, with
# 64 clients, unpipelined (-P 1) and pipelined 16 deep (-P 16). Compare with
# `go test -bench RedisDecision ./enforcer/limiter/` (docs/performance-redis.md).
set -euo pipefail
cd "$(dirname "$0")/.."
hack/ensure-redis.sh

requests=${REQUESTS:-300000}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 6399)
dir=$(mktemp -d)
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" --daemonize yes --logfile "$dir/redis.log"
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done

sha=$(redis-cli -p "$port" script load "$(cat enforcer/limiter/token_bucket.lua)")
# One key, a limit never reached: every call refills, takes a token and commits.
for pipeline in 1 16; do
  printf 'token bucket EVALSHA, 64 clients, -P %-2s: ' "$pipeline"
  redis-benchmark -p "$port" -c 64 -n "$requests" -P "$pipeline" -q \
    evalsha "$sha" 1 'sl:{bench/p/r/t}:tb:60s' 1 1099511627776 60000 1099511627776 | tr '\r' '\n' | grep -E 'requests per second' | tail -1
done
