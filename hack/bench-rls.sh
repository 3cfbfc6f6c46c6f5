#!/usr/bin/env bash
# Sluice's rate limit service beside envoyproxy/ratelimit (docs/ratelimit-service.md, "Performance"),
# in one run, with the same configuration file and the same load from
# cmd/sluice-load (a closed loop of ShouldRateLimit calls, as Envoy's rate
# limit filter makes them):
#   erl     envoyproxy/ratelimit (make erl), with its own Redis
#   sluice  sluice-ratelimit on the same file, with its own Redis
#   floor   sluice-ratelimit on the same descriptors marked unlimited: the
#           gRPC stack and descriptor matching, no decision and no Redis
# Each is measured with HOT (10) descriptor values in turn and with COLD
# (1000): decisions per second, p50 and p99 per call, CPU per call of the
# service and of its Redis, and Redis commands per decision (counted over a
# separate run of a fixed number of calls). The limit is never reached, so
# every call is a full decision. Everything runs on 127.0.0.1, and every
# process the script starts is stopped, by its PID, on exit.
#
# Settings (environment): DURATION and WARMUP (whole seconds; default 10
# and 2), CONCURRENCY (64 callers), CONNECTIONS (4), HOT (10), COLD (1000),
# ROUNDS (1: more rounds interleave the targets and report medians),
# RESULTS (directory for the raw JSON and the table; default a new
# temporary directory, kept).
set -euo pipefail
cd "$(dirname "$0")/.."

duration=${DURATION:-10}
warmup=${WARMUP:-2}
concurrency=${CONCURRENCY:-64}
connections=${CONNECTIONS:-4}
hot=${HOT:-10}
cold=${COLD:-1000}
rounds=${ROUNDS:-1}
for v in duration warmup concurrency connections hot cold rounds; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "error: ${v^^} must be a whole number, got '${!v}'" >&2; exit 2; }
done
(( duration >= 2 )) || { echo "error: DURATION must be at least 2 seconds" >&2; exit 2; }

log() { printf '>> %s\n' "$*" >&2; }

hack/ensure-redis.sh
hack/erl.sh >/dev/null
command -v jq >/dev/null || { echo "error: jq is needed (apt-get install jq)" >&2; exit 1; }

work=$(mktemp -d /tmp/sluice-bench-rls-work.XXXXXX)
results=${RESULTS:-$(mktemp -d /tmp/sluice-bench-rls.XXXXXX)}
mkdir -p "$results" "$work/bin"
rm -f "$results"/*.json
# shellcheck source=hack/lib/bench.sh
source hack/lib/bench.sh

log "building sluice-ratelimit and sluice-load"
go build -o "$work/bin/sluice-ratelimit" ./cmd/ratelimit
go build -o "$work/bin/sluice-load" ./cmd/sluice-load
load=$work/bin/sluice-load

# One domain, a per-user limit under an API key, as a gateway would send it.
# The limit is far above what a run sends.
mkdir -p "$work/config/limited/config" "$work/config/unlimited/config"
cat >"$work/config/limited/config/bench.yaml" <<'YAML'
domain: bench
descriptors:
  - key: generic_key
    value: api
    descriptors:
      - key: user_id
        rate_limit: {unit: hour, requests_per_unit: 1000000000}
YAML
cat >"$work/config/unlimited/config/bench.yaml" <<'YAML'
domain: bench
descriptors:
  - key: generic_key
    value: api
    descriptors:
      - key: user_id
        rate_limit: {unlimited: true}
YAML

targets=(floor sluice erl)
declare -A grpc_port redis_port
for name in "${targets[@]}"; do
  pick_port "port_$name"; grpc_port[$name]=$(eval echo "\$port_$name")
  pick_port "redis_$name"; redis_port[$name]=$(eval echo "\$redis_$name")
  mkdir -p "$work/redis-$name"
  start "redis-$name" redis-server --port "${redis_port[$name]}" --bind 127.0.0.1 --save "" \
    --appendonly no --dir "$work/redis-$name" --daemonize no
done
for name in "${targets[@]}"; do
  for _ in $(seq 50); do redis-cli -p "${redis_port[$name]}" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
pick_port http_a; pick_port http_b; pick_port http_c; pick_port admin_a; pick_port admin_b

start floor "$work/bin/sluice-ratelimit" --listen "127.0.0.1:${grpc_port[floor]}" \
  --http-listen "127.0.0.1:$http_a" --admin-listen "127.0.0.1:$admin_a" \
  --redis-url "redis://127.0.0.1:${redis_port[floor]}" --config-dir "$work/config/unlimited/config" --log-level warn
start sluice "$work/bin/sluice-ratelimit" --listen "127.0.0.1:${grpc_port[sluice]}" \
  --http-listen "127.0.0.1:$http_b" --admin-listen "127.0.0.1:$admin_b" \
  --redis-url "redis://127.0.0.1:${redis_port[sluice]}" --config-dir "$work/config/limited/config" --log-level warn
# envoyproxy/ratelimit reads its folder from RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY.
pick_port erl_debug
start erl env -i PATH="$PATH" LOG_LEVEL=warn USE_STATSD=false RUNTIME_ROOT="$work/config" \
  RUNTIME_SUBDIRECTORY=limited RUNTIME_APPDIRECTORY=config RUNTIME_WATCH_ROOT=false \
  BACKEND_TYPE=redis REDIS_SOCKET_TYPE=tcp REDIS_TYPE=SINGLE REDIS_URL="127.0.0.1:${redis_port[erl]}" \
  GRPC_HOST=127.0.0.1 GRPC_PORT="${grpc_port[erl]}" HOST=127.0.0.1 PORT="$http_c" \
  DEBUG_HOST=127.0.0.1 DEBUG_PORT="$erl_debug" bin/erl/ratelimit

sload() { # NAME TENANTS ARGS...
  local name=$1 tenants=$2
  shift 2
  "$load" --json --rls bench --descriptor 'generic_key=api,user_id=user-{tenant}' --tenants "$tenants" \
    --connections "$connections" "$@" "http://127.0.0.1:${grpc_port[$name]}"
}
for name in "${targets[@]}"; do
  ok=
  for _ in $(seq 100); do
    if sload "$name" 1 --requests 1 --warmup 0 --duration 1s --concurrency 1 --timeout 1s 2>/dev/null |
      jq -e '.status["2xx"] == 1' >/dev/null; then ok=1; break; fi
    sleep 0.1
  done
  [ -n "$ok" ] || { log "$name does not answer; its log:"; tail -n 20 "$work/$name.log" >&2; exit 1; }
done

# Redis commands per decision, over a fixed number of calls.
commands() {
  redis-cli -p "${redis_port[$1]}" info commandstats | tr -d '\r' |
    awk -F'[:=,]' '/^cmdstat_/ && $1 != "cmdstat_info" {n += $3} END {print n + 0}'
}
for name in "${targets[@]}"; do
  for load_name in hot cold; do
    tenants=${!load_name}
    before=$(commands "$name")
    sload "$name" "$tenants" --requests 20000 --warmup 0 --duration 60s --concurrency "$concurrency" >"$results/$name.$load_name.count.json"
    after=$(commands "$name")
    jq -n --argjson c $((after - before)) --argjson n "$(jq '.requests' "$results/$name.$load_name.count.json")" \
      '{commands: ($c / $n * 1000 | round / 1000)}' >"$results/$name.$load_name.redis.json"
    log "$name, $load_name: $(jq .commands "$results/$name.$load_name.redis.json") Redis commands per decision"
  done
done

hz=$(getconf CLK_TCK)
# closed NAME LOAD ROUND: max throughput, and CPU per call of the service and its Redis.
closed() {
  local name=$1 load_name=$2 r=$3 out="$results/$1.$2.closed.$3.json"
  sload "$name" "${!load_name}" --concurrency "$concurrency" --duration "${duration}s" --warmup "${warmup}s" >"$out" &
  local loader=$! t0 t1 s0 s1 r0 r1
  sleep "$warmup"
  t0=$(date +%s.%N) s0=$(ticks "${pid[$name]}") r0=$(ticks "${pid[redis-$name]}")
  sleep $((duration - 1))
  t1=$(date +%s.%N) s1=$(ticks "${pid[$name]}") r1=$(ticks "${pid[redis-$name]}")
  wait "$loader"
  jq -n --argjson rps "$(jq .rps "$out")" --argjson t0 "$t0" --argjson t1 "$t1" --argjson hz "$hz" \
    --argjson service $((s1 - s0)) --argjson redis $((r1 - r0)) \
    '{service: $service, redis: $redis} | map_values(. / $hz * 1e6 / ($rps * ($t1 - $t0)) * 10 | round / 10)' \
    >"$results/$name.$load_name.cpu.$r.json"
}
summary='"\(.rps) calls/s, OK \(.status["2xx"]), OVER_LIMIT \(.status["429"]), errors \(.errors), p50 \(.latencyUs.p50)µs p99 \(.latencyUs.p99)µs"'
for ((r = 1; r <= rounds; r++)); do
  log "round $r of $rounds (load average $(cut -d' ' -f1 /proc/loadavg) on $(nproc) CPUs)"
  for load_name in hot cold; do
    for name in "${targets[@]}"; do
      closed "$name" "$load_name" "$r"
      log "$name, $load_name: $(jq -r "$summary" "$results/$name.$load_name.closed.$r.json"); CPU µs/call $(jq -c . "$results/$name.$load_name.cpu.$r.json")"
      sleep 1
    done
  done
done

# Medians over the rounds; "vs floor" is the median of each round's ratio.
{
  echo "| | Descriptor values | Calls/s ($concurrency callers) | vs floor | vs ERL | p50 / p99 | Service CPU per call | Redis CPU per call | Redis commands per decision |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
  for load_name in hot cold; do
    for name in "${targets[@]}"; do
      jq -n -r --arg name "$name" --arg load "$load_name" --arg tenants "${!load_name}" --arg rounds "$rounds" --arg dir "$results" '
        def median: sort | .[(length - 1) / 2 | floor];
        def pct: "\(. * 100 | round)%";
        def ms: if . >= 1000 then "\(. / 10 | round / 100) ms" else "\(. | round) µs" end;
        [range(1; ($rounds | tonumber) + 1)] as $rs
        | [inputs] as $all
        | "| \($name) | \($load) (\($tenants)) | \([$all[] | select(.k == "closed" and .n == $name and .l == $load) | .v.rps] | median | round)"
          + " | \([$all[] | select(.k == "closed" and .n == $name and .l == $load) as $e | $all[] | select(.k == "closed" and .n == "floor" and .l == $load and .r == $e.r) | $e.v.rps / .v.rps] | median | pct)"
          + " | \([$all[] | select(.k == "closed" and .n == $name and .l == $load) as $e | $all[] | select(.k == "closed" and .n == "erl" and .l == $load and .r == $e.r) | $e.v.rps / .v.rps] | median | pct)"
          + " | \([$all[] | select(.k == "closed" and .n == $name and .l == $load) | .v.latencyUs.p50] | median | ms) / \([$all[] | select(.k == "closed" and .n == $name and .l == $load) | .v.latencyUs.p99] | median | ms)"
          + " | \([$all[] | select(.k == "cpu" and .n == $name and .l == $load) | .v.service] | median) µs"
          + " | \([$all[] | select(.k == "cpu" and .n == $name and .l == $load) | .v.redis] | median) µs"
          + " | \([$all[] | select(.k == "redis" and .n == $name and .l == $load) | .v.commands] | median) |"
      ' < <(for f in "$results"/*.closed.*.json "$results"/*.cpu.*.json "$results"/*.redis.json; do
              b=$(basename "$f" .json); IFS=. read -r n l k r <<<"$b"
              jq -c --arg n "$n" --arg l "$l" --arg k "$k" --arg r "${r:-0}" '{n: $n, l: $l, k: $k, r: $r, v: .}' "$f"
            done)
    done
  done
} >"$results/table.md"
cat "$results/table.md"
log "raw results and the table: $results"
