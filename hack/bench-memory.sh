#!/usr/bin/env bash
# The enforcer's memory beside its throughput (docs/performance.md): one
# sluice-enforcer, a limit never reached (every request admitted), under
# cmd/sluice-load's closed loop and then at a fixed RATE, X-Tenant-ID
# rotating among TENANTS tenants over CONCURRENCY keep-alive connections.
# Prints, per phase, requests/s beside the enforcer's resident memory (RSS,
# sampled every 0.2s: peak, its part of files, and at the end) and the Go
# heap in use from its /metrics; halfway through each phase it keeps the
# runtime's account (heap, stacks, GC goal, goroutines). The enforcer runs
# as injected, without --pprof: serving heap profiles costs memory and CPU
# (it samples allocations). Everything runs on loopback; every process it
# starts is stopped on exit.
#
# Settings (environment): DURATION (whole seconds per phase; default 10),
# CONCURRENCY (256), TENANTS (10000), RATE (10000; 0 skips the fixed-rate
# phase), CONFIG=policy-file|compiled (default compiled: the sidecar's
# --config, as the operator writes it; policy-file has the enforcer run
# sluice-policy-compile on the YAML), FLOOR=1 (runs each phase also through
# `sluice-load proxy`, net/http's reverse proxy deciding nothing, and prints
# its memory beside the enforcer's: the floor a Go proxy starts from),
# GOMEMLIMIT, GOGC and ENFORCER_GODEBUG (the enforcer's GODEBUG; each passed
# to the enforcer when set), PPROF=1 (the enforcer with --pprof; the script
# keeps its heap profiles and goroutines), RESULTS (directory for the JSON and profiles;
# default a new temporary directory).
set -euo pipefail
cd "$(dirname "$0")/.."

duration=${DURATION:-10}
concurrency=${CONCURRENCY:-256}
tenants=${TENANTS:-10000}
rate=${RATE:-10000}
mode=${CONFIG:-compiled}
floor=${FLOOR:-}
pprof=${PPROF:-}
for v in duration concurrency tenants rate; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "error: ${v^^} must be a whole number, got '${!v}'" >&2; exit 2; }
done
[[ $mode == compiled || $mode == policy-file ]] || { echo "error: CONFIG must be compiled or policy-file" >&2; exit 2; }
command -v jq >/dev/null || { echo "error: jq is required" >&2; exit 1; }
log() { printf '>> %s\n' "$*" >&2; }

hack/ensure-redis.sh
work=$(mktemp -d /tmp/sluice-bench-work.XXXXXX)
results=${RESULTS:-$(mktemp -d /tmp/sluice-bench-memory.XXXXXX)}
mkdir -p "$results" "$work/bin" "$work/redis"
# shellcheck source=hack/lib/bench.sh
source hack/lib/bench.sh

log "building sluice-enforcer, sluice-policy-compile and sluice-load"
go build -o "$work/bin/sluice-enforcer" ./cmd/enforcer
go build -o "$work/bin/sluice-policy-compile" ./cmd/policy-compile # --policy-file runs it
go build -o "$work/bin/sluice-load" ./cmd/sluice-load
load=$work/bin/sluice-load

pick_port redis_port
pick_port upstream_port
pick_port proxy_port
pick_port admin_port
pick_port debug_port
start redis redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
  --dir "$work/redis" --daemonize no
start upstream "$load" upstream --listen "127.0.0.1:$upstream_port" --exit-after 2h

cat >"$work/policy.yaml" <<EOF
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata:
  name: bench
  namespace: bench
spec:
  selector:
    matchLabels:
      app: bench
  upstreamPort: $upstream_port
  failureMode: Closed
  identity:
    sources:
      - header:
          name: X-Tenant-ID
  rules:
    - name: api
      algorithm: TokenBucket
      limits:
        - requests: 1000000000000
          period: 1s
EOF
config=(--policy-file "$work/policy.yaml")
if [ "$mode" = compiled ]; then
  # What the operator writes for the same policy (the injected sidecar's
  # --config).
  cat >"$work/config.json" <<EOF
{
  "schema": "sluice.dev/enforcer-config/v1",
  "namespace": "bench",
  "policies": [{
    "name": "bench", "uid": "00000000-0000-0000-0000-000000000001", "generation": 1,
    "selector": {"matchLabels": {"app": "bench"}}, "upstreamPort": $upstream_port,
    "mode": "Enforce", "failureMode": "Closed", "timeout": "50ms", "responseHeaders": "Both",
    "salt": "00000000-0000-0000-0000-000000000001",
    "rules": [{
      "name": "api", "match": {}, "algorithm": "TokenBucket", "cost": 1,
      "identity": {"sources": [{"header": {"name": "X-Tenant-ID"}}]},
      "limits": [{"requests": 1000000000000, "period": "1s"}]
    }]
  }]
}
EOF
  config=(--config "$work/config.json")
fi

start enforcer env ${GOMEMLIMIT:+GOMEMLIMIT=$GOMEMLIMIT} ${GOGC:+GOGC=$GOGC} ${ENFORCER_GODEBUG:+GODEBUG=$ENFORCER_GODEBUG} "$work/bin/sluice-enforcer" \
  --listen "127.0.0.1:$proxy_port" --admin-listen "127.0.0.1:$admin_port" \
  --debug-listen "127.0.0.1:$debug_port" ${pprof:+--pprof} \
  --upstream "http://127.0.0.1:$upstream_port" --redis-url "redis://127.0.0.1:$redis_port" \
  "${config[@]}" --log-level warn
for _ in $(seq 150); do
  curl -sf -o /dev/null "http://127.0.0.1:$admin_port/readyz" && break
  sleep 0.1
done
curl -sf -o /dev/null "http://127.0.0.1:$admin_port/readyz" || { tail -n 30 "$work/enforcer.log" >&2; exit 1; }

# rss PID: its resident memory (KiB); rss_file PID: the part that is pages of
# files (its binary's, mostly), not its heap, stacks and the runtime's own.
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
rss_file() { awk '/^RssFile:/ {print $2}' "/proc/$1/status"; }
mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }
# runtime_memory: the Go runtime's account of its memory (heap, stacks, GC
# goal, goroutines), from the enforcer's /metrics.
runtime_memory() {
  curl -sf "http://127.0.0.1:$admin_port/metrics" | grep -E '^go_(memstats_(heap|stack|next_gc|sys|gc_sys|buck_hash|other_sys|mspan)[a-z_]*|goroutines) ' || true
}
# heap_inuse: the Go heap in use (bytes).
heap_inuse() { runtime_memory | awk '$1 == "go_memstats_heap_inuse_bytes" {printf "%d", $2}'; }

targets=(enforcer)
declare -A port=([enforcer]=$proxy_port) idle
if [ -n "$floor" ]; then
  # The floor: net/http's reverse proxy to the same application, deciding
  # nothing, under the same load.
  pick_port floor_port
  start floor "$load" proxy --listen "127.0.0.1:$floor_port" --upstream "http://127.0.0.1:$upstream_port" --exit-after 2h
  for _ in $(seq 50); do
    curl -sf -o /dev/null "http://127.0.0.1:$floor_port/" && break
    sleep 0.1
  done
  targets+=(floor)
  port[floor]=$floor_port
fi
sleep 1
for t in "${targets[@]}"; do
  idle[$t]=$(rss "${pid[$t]}")
  log "$t idle: RSS $(mib "${idle[$t]}") MiB, $(mib "$(rss_file "${pid[$t]}")") of files"
done

rows=()
# phase TARGET NAME LOAD-FLAGS...: runs the load through TARGET, sampling
# its RSS, then reads the enforcer's heap.
phase() {
  local target=$1 name=$2 p=${pid[$1]} peak=0 peak_file=0 r
  shift 2
  "$load" --concurrency "$concurrency" --duration "${duration}s" --warmup 2s \
    -H 'X-Tenant-ID: tenant-{tenant}' --tenants "$tenants" --json "$@" \
    "http://127.0.0.1:${port[$target]}/" >"$results/$target-$name.json" &
  local loader=$! sampled= t0 t1 half=$((SECONDS + (duration + 2) / 2))
  t0=$(ticks "$p")
  while kill -0 "$loader" 2>/dev/null; do
    r=$(rss "$p")
    if ((r > peak)); then
      peak=$r
      peak_file=$(rss_file "$p")
    fi
    # Halfway through: the runtime's own account (heap, stacks, GC goal).
    if [ "$target" = enforcer ] && [ -z "$sampled" ] && ((SECONDS >= half)); then
      sampled=1
      runtime_memory >"$results/$name.memstats.txt"
      if [ -n "$pprof" ]; then
        curl -sf -o "$results/$name.goroutines.txt" "http://127.0.0.1:$debug_port/debug/pprof/goroutine?debug=1" || true
        curl -sf -o "$results/$name.mid.heap.pprof" "http://127.0.0.1:$debug_port/debug/pprof/heap" || true
      fi
    fi
    sleep 0.2
  done
  t1=$(ticks "$p")
  wait "$loader" || true # it reports late requests with a non-zero status
  local end heap=-
  end=$(rss "$p")
  if [ "$target" = enforcer ]; then
    [ -z "$pprof" ] || curl -sf -o "$results/$name.heap.pprof" "http://127.0.0.1:$debug_port/debug/pprof/heap"
    heap=$(awk -v b="$(heap_inuse)" 'BEGIN {printf "%.1f", b / 1048576}')
  fi
  # CPU per request over the whole run, warm-up included.
  local cpu json=$results/$target-$name.json
  cpu=$(jq -r --argjson ticks $((t1 - t0)) --argjson hz "$(getconf CLK_TCK)" \
    '$ticks / $hz * 1e6 / (.requests + (.rps * 2)) | round' "$json")
  rows+=("| $target | $name | $(jq -r '.rps | round' "$json") | $cpu µs | $(jq -r '.errors + .status["503"]' "$json") | $(mib "${idle[$target]}") | $(mib "$peak") ($(mib "$peak_file") of files) | $(mib "$end") | $heap |")
  log "${rows[-1]}"
}
# With the floor, each phase runs through both, one after the other.
for t in "${targets[@]}"; do phase "$t" closed; done
if ((rate > 0)); then
  for t in "${targets[@]}"; do phase "$t" "rate-$rate" --rate "$rate"; done
fi
[ -z "$pprof" ] || go tool pprof -top -sample_index=inuse_space -nodecount=25 "$work/bin/sluice-enforcer" \
  "$results/closed.mid.heap.pprof" >"$results/closed.heap.txt" 2>/dev/null || true
cp "$work/bin/sluice-enforcer" "$results/"

echo
echo "$(nproc) CPUs shared by the load generator, proxy, Redis and upstream; $concurrency connections,"
echo "$tenants tenants, ${duration}s per phase after 2s warm-up, configuration: $mode${GOMEMLIMIT:+, GOMEMLIMIT=$GOMEMLIMIT}${GOGC:+, GOGC=$GOGC}${ENFORCER_GODEBUG:+, GODEBUG=$ENFORCER_GODEBUG}${pprof:+, --pprof}; results in $results"
echo
echo "| Proxy | Load | Requests/s | CPU per request | Errors + 503 | Idle RSS (MiB) | Peak RSS (MiB) | RSS after (MiB) | Go heap in use after (MiB) |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
