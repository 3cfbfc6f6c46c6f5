#!/usr/bin/env bash
# gRPC through the enforcer (docs/performance.md), beside HTTP/1.1, in one
# run: the same load from cmd/sluice-load against
#   http-direct    the trivial HTTP/1.1 upstream (sluice-load upstream)
#   http-enforcer  sluice-enforcer in front of it (upstreamProtocol HTTP1)
#   grpc-direct    the gRPC sample application (hack/orders), unary
#                  shop.v1.Orders/Create calls over cleartext HTTP/2
#   grpc-enforcer  sluice-enforcer in front of it (upstreamProtocol H2C,
#                  match.grpc)
# Both enforcers run a limit never reached: one Redis decision per request
# or call, all admitted (failureMode Closed, so a decision that does not
# come back is a 503, never a request passed without one). Each target is
# measured three ways: maximum throughput (closed loop, CONCURRENCY callers;
# gRPC callers share CONNECTIONS client connections, HTTP/1.1 ones have a
# connection each), latency at a fixed RATE (open model), and one caller
# sending one request at a time. Requests rotate X-Tenant-ID (gRPC metadata
# x-tenant-id) among TENANTS tenants. Then both enforcers' CPU and
# allocations are profiled under closed-loop load through their own pprof
# (--pprof on the debug listener). Everything runs on 127.0.0.1, and every process the
# script starts is stopped, by its PID, on exit.
#
# Settings (environment): DURATION and WARMUP (whole seconds, per
# measurement; default 10 and 2), CONCURRENCY (64), CONNECTIONS (4), RATE
# (2000), TENANTS (10), ROUNDS (1: more rounds interleave the targets and
# report medians), PROFILE (1: profile; 0: skip), ENFORCER_GOMAXPROCS (the
# enforcers' GOMAXPROCS; default Go's, the machine's CPUs), RESULTS
# (directory for the raw JSON, profiles and table; default a new temporary
# directory, kept).
set -euo pipefail
cd "$(dirname "$0")/.."

duration=${DURATION:-10}
warmup=${WARMUP:-2}
concurrency=${CONCURRENCY:-64}
connections=${CONNECTIONS:-4}
rate=${RATE:-2000}
tenants=${TENANTS:-10}
profile=${PROFILE:-1}
rounds=${ROUNDS:-1}
enforcer_procs=${ENFORCER_GOMAXPROCS:-0}
for v in duration warmup concurrency connections rate tenants profile rounds enforcer_procs; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "error: ${v^^} must be a whole number, got '${!v}'" >&2; exit 2; }
done
(( duration >= 2 )) || { echo "error: DURATION must be at least 2 seconds" >&2; exit 2; }
(( tenants >= 1 )) || { echo "error: TENANTS must be at least 1" >&2; exit 2; }

log() { printf '>> %s\n' "$*" >&2; }

hack/ensure-redis.sh
command -v jq >/dev/null || { echo "error: jq is needed (apt-get install jq)" >&2; exit 1; }
command -v curl >/dev/null || { echo "error: curl is needed (apt-get install curl)" >&2; exit 1; }

# --- scratch space and cleanup ---------------------------------------------

work=$(mktemp -d /tmp/sluice-bench-grpc-work.XXXXXX)
results=${RESULTS:-$(mktemp -d /tmp/sluice-bench-grpc.XXXXXX)}
mkdir -p "$results" "$work/bin" "$work/redis"
# A reused RESULTS directory must not mix an earlier run's rounds into the medians.
rm -f "$results"/*.closed.*.json "$results"/*.open.*.json "$results"/*.serial.*.json "$results"/*.cpu.*.json
# cleanup on exit, start, pick_port and ticks
# shellcheck source=hack/lib/bench.sh
source hack/lib/bench.sh

# --- build and start -----------------------------------------------------------

log "building sluice-enforcer, sluice-policy-compile, sluice-load and hack/orders"
go build -o "$work/bin/sluice-enforcer" ./cmd/enforcer
go build -o "$work/bin/sluice-policy-compile" ./cmd/policy-compile # --policy-file runs it
go build -o "$work/bin/sluice-load" ./cmd/sluice-load
go build -o "$work/bin/orders" ./hack/orders
load=$work/bin/sluice-load

for p in redis_port http_port grpc_port http_enf http_enf_admin http_enf_debug grpc_enf grpc_enf_admin grpc_enf_debug; do
  pick_port "$p"
done
start redis redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
  --dir "$work/redis" --daemonize no
start http-upstream "$load" upstream --listen "127.0.0.1:$http_port" --exit-after 2h
start grpc-upstream "$work/bin/orders" --listen "127.0.0.1:$grpc_port" --pod bench

# policy NAME PORT PROTOCOL MATCH: a limit never reached, per tenant.
policy() {
  cat <<EOF
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata:
  name: $1
  namespace: bench
spec:
  selector:
    matchLabels:
      app: bench
  upstreamPort: $2
  upstreamProtocol: $3
  failureMode: Closed
  identity:
    sources:
      - header:
          name: X-Tenant-ID
  rules:
    - name: api
      match: $4
      algorithm: TokenBucket
      limits:
        - requests: 1000000000000
          period: 1s
EOF
}
policy bench-http "$http_port" HTTP1 '{paths: [{prefix: /}]}' >"$work/http.yaml"
policy bench-grpc "$grpc_port" H2C '{grpc: [{service: shop.v1.Orders}]}' >"$work/grpc.yaml"

enforcer() { # NAME PORT ADMIN DEBUG UPSTREAM POLICY
  start "$1" env ${ENFORCER_GOMAXPROCS:+GOMAXPROCS=$ENFORCER_GOMAXPROCS} "$work/bin/sluice-enforcer" --listen "127.0.0.1:$2" --admin-listen "127.0.0.1:$3" \
    --debug-listen "127.0.0.1:$4" --pprof --upstream "http://127.0.0.1:$5" \
    --redis-url "redis://127.0.0.1:$redis_port" --policy-file "$6" --log-level warn
}
enforcer http-enforcer "$http_enf" "$http_enf_admin" "$http_enf_debug" "$http_port" "$work/http.yaml"
enforcer grpc-enforcer "$grpc_enf" "$grpc_enf_admin" "$grpc_enf_debug" "$grpc_port" "$work/grpc.yaml"

targets=(http-direct http-enforcer grpc-direct grpc-enforcer)
declare -A url=(
  [http-direct]="http://127.0.0.1:$http_port/"
  [http-enforcer]="http://127.0.0.1:$http_enf/"
  [grpc-direct]="http://127.0.0.1:$grpc_port"
  [grpc-enforcer]="http://127.0.0.1:$grpc_enf"
)
declare -A kind=([http-direct]="" [http-enforcer]="" [grpc-direct]=--grpc [grpc-enforcer]=--grpc)
declare -A proxy_pid=([http-direct]="" [http-enforcer]=${pid[http-enforcer]} [grpc-direct]="" [grpc-enforcer]=${pid[grpc-enforcer]})
declare -A upstream_pid=([http-direct]=${pid[http-upstream]} [http-enforcer]=${pid[http-upstream]}
  [grpc-direct]=${pid[grpc-upstream]} [grpc-enforcer]=${pid[grpc-upstream]})

# sload NAME ARGS...: sluice-load against target NAME. sload_args sets
# args to the command line, for runs in the background whose PID is needed.
sload_args() {
  local name=$1
  shift
  args=("$load")
  if [ -n "${kind[$name]}" ]; then args+=("${kind[$name]}"); fi
  args+=(--connections "$connections" -H 'X-Tenant-ID: tenant-{tenant}' --tenants "$tenants" --json "$@" "${url[$name]}")
}
sload() {
  local args
  sload_args "$@"
  "${args[@]}"
}

wait_ok() { # NAME: one request answered 2xx, or NAME's log is shown and the run ends
  for _ in $(seq 150); do
    if sload "$1" --requests 1 --warmup 0 --duration 1s --concurrency 1 --timeout 1s 2>/dev/null |
      jq -e '.status["2xx"] == 1' >/dev/null; then
      return 0
    fi
    sleep 0.1
  done
  log "$1 does not answer at ${url[$1]}; the logs:"
  tail -n 20 "$work"/*.log >&2
  exit 1
}
for _ in $(seq 50); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
for name in "${targets[@]}"; do wait_ok "$name"; done

# --- one decision per request --------------------------------------------------

script_calls() {
  redis-cli -p "$redis_port" info commandstats | tr -d '\r' |
    awk -F'[:=,]' '/^cmdstat_(evalsha|eval):/ {n += $3} END {print n + 0}'
}
for name in http-enforcer grpc-enforcer; do
  before=$(script_calls)
  sload "$name" --requests 1000 --warmup 0 --duration 60s --concurrency 8 >"$results/$name.check.json"
  after=$(script_calls)
  log "$name: 1000 requests -> $((after - before)) Redis script calls; $(jq -r '"\(.status["2xx"]) allowed, \(.errors) errors"' "$results/$name.check.json")"
done

# --- measure -----------------------------------------------------------------

hz=$(getconf CLK_TCK)

# closed NAME ROUND: max throughput, and the CPU each process spent per request,
# sampled over the measured period less its last second.
closed() {
  local name=$1 r=$2 out="$results/$1.closed.$2.json" args
  sload_args "$name" --concurrency "$concurrency" --duration "${duration}s" --warmup "${warmup}s"
  "${args[@]}" >"$out" &
  local loader=$! t0 t1 p0 p1 r0 r1 u0 u1 l0 l1
  sleep "$warmup"
  t0=$(date +%s.%N) l0=$(ticks "$loader") p0=$(ticks ${proxy_pid[$name]}) r0=$(ticks "${pid[redis]}") u0=$(ticks "${upstream_pid[$name]}")
  sleep $((duration - 1))
  t1=$(date +%s.%N) l1=$(ticks "$loader") p1=$(ticks ${proxy_pid[$name]}) r1=$(ticks "${pid[redis]}") u1=$(ticks "${upstream_pid[$name]}")
  wait "$loader"
  jq -n --argjson rps "$(jq .rps "$out")" --argjson t0 "$t0" --argjson t1 "$t1" --argjson hz "$hz" \
    --argjson proxy $((p1 - p0)) --argjson redis $((r1 - r0)) --argjson upstream $((u1 - u0)) --argjson load $((l1 - l0)) \
    '{proxy: $proxy, redis: $redis, upstream: $upstream, load: $load}
     | map_values(. / $hz * 1e6 / ($rps * ($t1 - $t0)) * 10 | round / 10)' >"$results/$name.cpu.$r.json"
}

summary='"\(.rps) req/s, 2xx \(.status["2xx"]), 429 \(.status["429"]), 503 \(.status["503"]), errors \(.errors), p50 \(.latencyUs.p50)µs p99 \(.latencyUs.p99)µs"'
for ((r = 1; r <= rounds; r++)); do
  busy=$(cut -d' ' -f1 /proc/loadavg)
  log "round $r of $rounds (load average $busy on $(nproc) CPUs)"
  for name in "${targets[@]}"; do
    closed "$name" "$r"
    log "$name, closed loop:     $(jq -r "$summary" "$results/$name.closed.$r.json")"
    log "$name, CPU µs/request:  $(jq -r '"proxy \(.proxy), redis \(.redis), upstream \(.upstream), load generator \(.load)"' "$results/$name.cpu.$r.json")"
    sleep 1
    sload "$name" --rate "$rate" --concurrency "$concurrency" --duration "${duration}s" --warmup "${warmup}s" >"$results/$name.open.$r.json"
    log "$name, $rate req/s:  $(jq -r "$summary" "$results/$name.open.$r.json")"
    sleep 1
    sload "$name" --concurrency 1 --connections 1 --duration "$((duration / 2))s" --warmup 1s >"$results/$name.serial.$r.json"
    log "$name, one caller:   $(jq -r "$summary" "$results/$name.serial.$r.json")"
    sleep 1
  done
done

# --- the table -----------------------------------------------------------------

# Medians over the rounds; "vs direct" is the median of each round's ratio,
# since the targets of a round ran under the same conditions.
jq -n -r --arg order "${targets[*]}" --arg rate "$rate" --arg concurrency "$concurrency" '
  def ms: if . >= 1000 then "\(. / 10 | round / 100) ms" else "\(. | round) µs" end;
  def pct: "\(. * 100 | round)%";
  def median: sort | .[(length - 1) / 2 | floor];
  [inputs | {file: (input_filename | split("/") | last)} + .]
  | map(. + {name: (.file | split(".")[0]), mode: (.file | split(".")[1]), round: (.file | split(".")[2])})
  | group_by(.name) | map({key: .[0].name, value: (group_by(.mode) | map({key: .[0].mode, value: .}) | from_entries)}) | from_entries
  | . as $r
  | "| | Calls/s (closed loop, \($concurrency) callers) | vs direct | p50 / p99 | Enforcer CPU per call | Redis CPU per call | Application CPU per call | Load generator CPU per call | p50 / p99 at \($rate)/s | One caller: p50 / p99 |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    (($order | split(" "))[] as $n | $r[$n] as $m
     | ($n | split("-")[0]) as $proto
     | (if ($n | endswith("direct")) then "–" else
          ([$m.closed[] as $e | $r["\($proto)-direct"].closed[] | select(.round == $e.round) | $e.rps / .rps] | median | pct) end) as $vs
     | ($m.cpu | map(.proxy) | median) as $cpu
     | ($m.cpu | map(.redis) | median) as $redis
     | "| \($n) | \($m.closed | map(.rps) | median | round) | \($vs)"
       + " | \($m.closed | map(.latencyUs.p50) | median | ms) / \($m.closed | map(.latencyUs.p99) | median | ms)"
       + " | \(if $cpu > 0 then "\($cpu) µs" else "–" end) | \(if $redis >= 1 then "\($redis) µs" else "–" end)"
       + " | \($m.cpu | map(.upstream) | median) µs | \($m.cpu | map(.load) | median) µs"
       + " | \($m.open | map(.latencyUs.p50) | median | ms) / \($m.open | map(.latencyUs.p99) | median | ms)"
       + " | \($m.serial | map(.latencyUs.p50) | median | ms) / \($m.serial | map(.latencyUs.p99) | median | ms) |")
' "$results"/*.closed.*.json "$results"/*.open.*.json "$results"/*.serial.*.json "$results"/*.cpu.*.json >"$results/table.md"

# --- profile -------------------------------------------------------------------

if [ "$profile" = 1 ]; then
  secs=$((duration > 3 ? duration - 2 : 1))
  for name in grpc-enforcer http-enforcer; do
    debug=$grpc_enf_debug
    [ "$name" = http-enforcer ] && debug=$http_enf_debug
    log "profiling $name for ${secs}s under closed-loop load"
    sload_args "$name" --concurrency "$concurrency" --duration "${duration}s" --warmup "${warmup}s"
    "${args[@]}" >"$results/$name.profiled.json" &
    loader=$!
    sleep "$warmup"
    curl -sf -o "$results/$name.cpu.pprof" "http://127.0.0.1:$debug/debug/pprof/profile?seconds=$secs" &
    cpu=$!
    curl -sf -o "$results/$name.allocs.pprof" "http://127.0.0.1:$debug/debug/pprof/allocs?seconds=$secs"
    wait "$cpu" "$loader"
    go tool pprof -top -nodecount=40 "$work/bin/sluice-enforcer" "$results/$name.cpu.pprof" >"$results/$name.cpu.txt" 2>/dev/null
    go tool pprof -top -cum -nodecount=80 "$work/bin/sluice-enforcer" "$results/$name.cpu.pprof" >"$results/$name.cpu-cum.txt" 2>/dev/null
    go tool pprof -top -sample_index=alloc_space -nodecount=40 "$work/bin/sluice-enforcer" \
      "$results/$name.allocs.pprof" >"$results/$name.allocs.txt" 2>/dev/null
    go tool pprof -top -sample_index=alloc_objects -nodecount=40 "$work/bin/sluice-enforcer" \
      "$results/$name.allocs.pprof" >"$results/$name.alloc-objects.txt" 2>/dev/null
    jq -r --arg name "$name" '"\($name): \(.requests) calls while profiled"' "$results/$name.profiled.json" >&2 || true
  done
  cp "$work/bin/sluice-enforcer" "$results/sluice-enforcer"
  log "profiles: $results/{grpc,http}-enforcer.{cpu,allocs}.pprof (binary: $results/sluice-enforcer)"
fi

echo
echo "$(nproc) CPUs, load generator, enforcers, Redis and upstreams on the same machine; ${duration}s per"
echo "measurement after ${warmup}s warm-up, $rounds round(s), median shown; gRPC callers share $connections"
echo "connections; enforcers' GOMAXPROCS ${ENFORCER_GOMAXPROCS:-as Go sets it}; results in $results"
echo
cat "$results/table.md"
