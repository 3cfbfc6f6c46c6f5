#!/usr/bin/env bash
# Proxy throughput and latency (docs/performance.md): the same load, from
# cmd/sluice-load, against
#   direct          the trivial upstream (sluice-load upstream), no proxy
#   nginx           nginx, 1 worker, keep-alive upstream, limit_req that never denies
#   bare-proxy      net/http's reverse proxy deciding nothing (sluice-load proxy):
#                   the floor: "Above bare-proxy" is an enforcer's CPU per request
#                   less its, the median of the rounds' differences
#   enforcer-allow  sluice-enforcer, a limit never reached: every request admitted,
#                   from leases once a tenant is busy (Redis calls per request shown)
#   enforcer-deny   sluice-enforcer, half the tenants over their limit: about 50% 429
#                   (left out above 20,000 tenants: a policy has at most 10,000 overrides)
#   enforcer-exempt sluice-enforcer whose one rule exempts every request: its
#                   proxy path alone, no Redis decision (where the time goes)
# each measured twice: maximum throughput (closed loop, CONCURRENCY
# connections) and latency at a fixed RATE (open model). Requests rotate
# X-Tenant-ID among TENANTS tenants. Everything runs on this machine, on
# loopback, and every process it starts is stopped on exit.
#
# Settings (environment): DURATION and WARMUP (whole seconds, per
# measurement; default 10 and 2), CONCURRENCY (64), RATE (2000), TENANTS
# (10; 10000 shows tenants each too rarely seen to lease), ROUNDS (1: more
# rounds interleave the targets and report the median),
# PROFILE=1 (after the rounds, profile enforcer-allow and bare-proxy under
# closed-loop load: CPU, and allocations with their count per request,
# through a pprof listener compiled in with a build overlay),
# ENFORCER_GOMAXPROCS (the enforcers' and bare-proxy's GOMAXPROCS; default
# Go's, the machine's CPUs or the container's CPU limit), RESULTS (directory for the
# raw JSON, profiles and table; default a new temporary directory, kept).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

duration=${DURATION:-10}
warmup=${WARMUP:-2}
concurrency=${CONCURRENCY:-64}
rate=${RATE:-2000}
tenants=${TENANTS:-10}
rounds=${ROUNDS:-1}
profile=${PROFILE:-0}
enforcer_procs=${ENFORCER_GOMAXPROCS:-0}
for v in duration warmup concurrency rate tenants rounds enforcer_procs; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "error: ${v^^} must be a whole number, got '${!v}'" >&2; exit 2; }
done
(( tenants >= 2 && tenants % 2 == 0 )) || { echo "error: TENANTS must be even and at least 2" >&2; exit 2; }
(( duration >= 2 )) || { echo "error: DURATION must be at least 2 seconds" >&2; exit 2; }

log() { printf '>> %s\n' "$*" >&2; }

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

# --- tools -----------------------------------------------------------------

hack/ensure-redis.sh
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
missing=()
[ -x "$nginx_bin" ] || missing+=(nginx)
command -v jq >/dev/null || missing+=(jq)
if ((${#missing[@]})); then
  command -v apt-get >/dev/null || { echo "error: install ${missing[*]} and re-run" >&2; exit 1; }
  log "installing ${missing[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  pkgs=()
  for m in "${missing[@]}"; do
    if [ "$m" = nginx ]; then
      # Debian's smallest nginx; releases without it only have nginx.
      if grep -q 'Candidate: [0-9]' <<<"$(apt-cache policy nginx-light 2>/dev/null)"; then pkgs+=(nginx-light); else pkgs+=(nginx); fi
    else
      pkgs+=("$m")
    fi
  done
  $sudo apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
  # The package may start a system-wide nginx on :80; this script runs its own.
  if [[ " ${missing[*]} " == *" nginx "* ]]; then
    if command -v systemctl >/dev/null && systemctl is-active --quiet nginx 2>/dev/null; then
      $sudo systemctl stop nginx || true
    elif [ -s /run/nginx.pid ]; then
      $sudo "$nginx_bin" -s quit 2>/dev/null || true
    fi
  fi
fi

# --- scratch space and cleanup ---------------------------------------------

work=$(mktemp -d /tmp/sluice-bench-work.XXXXXX)
results=${RESULTS:-$(mktemp -d /tmp/sluice-bench.XXXXXX)}
mkdir -p "$results" "$work/bin" "$work/redis" "$work/nginx"
# A reused RESULTS directory must not mix an earlier run's rounds into the medians.
rm -f "$results"/*.closed.*.json "$results"/*.open.*.json "$results"/*.serial.*.json "$results"/*.cpu.*.json
# cleanup on exit, start, pick_port and ticks
# shellcheck source=hack/lib/bench.sh
source hack/lib/bench.sh

# --- build -------------------------------------------------------------------

build_flags=()
if [ "$profile" = 1 ]; then
  pick_port pprof_port
  pick_port pprof_bare
  # A pprof listener for the profiling run, added to the enforcer's and
  # sluice-load's main packages at build time only; the source tree is not
  # touched.
  cat >"$work/bench_pprof.go" <<'EOF'
package main

import (
	"net/http"
	_ "net/http/pprof"
	"os"
)

func init() {
	if addr := os.Getenv("SLUICE_BENCH_PPROF"); addr != "" {
		go func() { _ = http.ListenAndServe(addr, nil) }()
	}
}
EOF
  printf '{"Replace": {"%s/cmd/enforcer/zz_bench_pprof.go": "%s/bench_pprof.go", "%s/cmd/sluice-load/zz_bench_pprof.go": "%s/bench_pprof.go"}}\n' \
    "$repo" "$work" "$repo" "$work" >"$work/overlay.json"
  build_flags=(-overlay "$work/overlay.json")
fi
log "building sluice-enforcer, sluice-policy-compile and sluice-load"
go build "${build_flags[@]}" -o "$work/bin/sluice-enforcer" ./cmd/enforcer
go build -o "$work/bin/sluice-policy-compile" ./cmd/policy-compile # --policy-file runs it
go build "${build_flags[@]}" -o "$work/bin/sluice-load" ./cmd/sluice-load
load=$work/bin/sluice-load

# --- the processes -------------------------------------------------------------

pick_port redis_port
pick_port upstream_port
pick_port nginx_port
pick_port bare_port
pick_port allow_port
pick_port allow_admin
pick_port deny_port
pick_port deny_admin
pick_port exempt_port
pick_port exempt_admin

start redis redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
  --dir "$work/redis" --daemonize no
start upstream "$load" upstream --listen "127.0.0.1:$upstream_port" --exit-after 2h
# As many threads as the enforcers, so that their CPU per request compares.
start bare-proxy env ${pprof_bare:+SLUICE_BENCH_PPROF=127.0.0.1:$pprof_bare} \
  ${ENFORCER_GOMAXPROCS:+GOMAXPROCS=$ENFORCER_GOMAXPROCS} "$load" proxy \
  --listen "127.0.0.1:$bare_port" --upstream "http://127.0.0.1:$upstream_port" --exit-after 2h

user_line="# not root: nginx runs as the current user"
if [ "$(id -u)" -eq 0 ]; then
  # As root, nginx's worker drops to an unprivileged user.
  user_line="user nobody $(id -gn nobody);"
  chmod 0755 "$work" "$work/nginx"
fi
sed -e "s|@DIR@|$work/nginx|g" -e "s|@LISTEN@|127.0.0.1:$nginx_port|g" \
  -e "s|@UPSTREAM@|127.0.0.1:$upstream_port|g" -e "s|@USER@|$user_line|g" \
  hack/nginx/bench-proxy.conf.template >"$work/nginx/nginx.conf"
nginx_args=(-p "$work/nginx/" -c "$work/nginx/nginx.conf" -g "daemon off;")
# -e keeps nginx from opening the packaged error log before reading its config.
# Read whole before grep -q, which stops at the first match (SIGPIPE under pipefail).
if grep -q -- '-e filename' <<<"$("$nginx_bin" -h 2>&1)"; then nginx_args+=(-e "$work/nginx/error.log"); fi
"$nginx_bin" -t "${nginx_args[@]}" >"$work/nginx-check.log" 2>&1 || { cat "$work/nginx-check.log" >&2; exit 1; }
start nginx "$nginx_bin" "${nginx_args[@]}"

# The policies, on the same route and identity. allow: a limit never reached,
# so each request is admitted (by Redis, or from a lease). deny: tenants 0..n/2-1
# have that limit as an override; the others one request per 744h, so after
# their first request every one of theirs is refused. exempt: no decision.
# failureMode Closed, so a decision that does not come back is a 503, never a
# request passed without one.
policy() { # NAME: the policy's head, up to its overrides
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
  upstreamPort: $upstream_port
  failureMode: Closed
  identity:
    sources:
      - header:
          name: X-Tenant-ID
EOF
}
{
  policy bench-allow
  cat <<'EOF'
  rules:
    - name: api
      algorithm: TokenBucket
      limits:
        - requests: 1000000000000
          period: 1s
EOF
} >"$work/allow.yaml"
{
  policy bench-deny
  cat <<'EOF'
  rules:
    - name: api
      algorithm: TokenBucket
      limits:
        - requests: 1
          period: 744h
  overrides:
EOF
  for ((t = 0; t < tenants / 2; t++)); do
    printf '    - tenant: tenant-%d\n      rule: api\n      limits:\n        - requests: 1000000000000\n          period: 1s\n' "$t"
  done
} >"$work/deny.yaml"
{
  policy bench-exempt
  cat <<'EOF'
  rules:
    - name: all
      match:
        paths:
          - prefix: /
      exempt: true
EOF
} >"$work/exempt.yaml"

enforcer() { # NAME PORT ADMIN POLICY
  start "$1" env ${pprof_port:+SLUICE_BENCH_PPROF=127.0.0.1:$pprof_port} \
    ${ENFORCER_GOMAXPROCS:+GOMAXPROCS=$ENFORCER_GOMAXPROCS} "$work/bin/sluice-enforcer" \
    --listen "127.0.0.1:$2" --admin-listen "127.0.0.1:$3" \
    --upstream "http://127.0.0.1:$upstream_port" --redis-url "redis://127.0.0.1:$redis_port" \
    --policy-file "$4" --log-level warn
}
enforcer enforcer-allow "$allow_port" "$allow_admin" "$work/allow.yaml"
pprof_port_allow=${pprof_port:-}
# Only the allow enforcer gets the profiling listener.
pprof_port=
deny=0
((tenants <= 20000)) && deny=1
((deny)) && enforcer enforcer-deny "$deny_port" "$deny_admin" "$work/deny.yaml"
enforcer enforcer-exempt "$exempt_port" "$exempt_admin" "$work/exempt.yaml"

# wait_ready NAME URL: URL answers 2xx, or NAME's log is shown and the run ends.
wait_ready() {
  for _ in $(seq 150); do
    if "$load" --requests 1 --warmup 0 --duration 1s --concurrency 1 --timeout 1s --json "$2" 2>/dev/null |
      jq -e '.status["2xx"] == 1' >/dev/null; then
      return 0
    fi
    sleep 0.1
  done
  log "$1 is not ready at $2; its log:"
  tail -n 30 "$work/$1.log" >&2
  exit 1
}
for _ in $(seq 50); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
wait_ready upstream "http://127.0.0.1:$upstream_port/"
wait_ready nginx "http://127.0.0.1:$nginx_port/"
wait_ready bare-proxy "http://127.0.0.1:$bare_port/"
wait_ready enforcer-allow "http://127.0.0.1:$allow_admin/readyz"
((deny)) && wait_ready enforcer-deny "http://127.0.0.1:$deny_admin/readyz"
wait_ready enforcer-exempt "http://127.0.0.1:$exempt_admin/readyz"

targets=(direct nginx bare-proxy enforcer-allow)
((deny)) && targets+=(enforcer-deny)
targets+=(enforcer-exempt)
declare -A url=(
  [direct]="http://127.0.0.1:$upstream_port/"
  [nginx]="http://127.0.0.1:$nginx_port/"
  [bare-proxy]="http://127.0.0.1:$bare_port/"
  [enforcer-allow]="http://127.0.0.1:$allow_port/"
  [enforcer-deny]="http://127.0.0.1:$deny_port/"
  [enforcer-exempt]="http://127.0.0.1:$exempt_port/"
)
headers=(-H 'X-Tenant-ID: tenant-{tenant}' --tenants "$tenants")

# --- how many Redis calls the enforcers make --------------------------------

script_calls() {
  redis-cli -p "$redis_port" info commandstats | tr -d '\r' |
    awk -F'[:=,]' '/^cmdstat_(evalsha|eval):/ {n += $3} END {print n + 0}'
}
# 1,000 requests from 8 connections, a cold start: tenants have no leases yet.
for name in "${targets[@]}"; do
  [[ $name == enforcer-allow || $name == enforcer-deny ]] || continue
  before=$(script_calls)
  "$load" --requests 1000 --warmup 0 --duration 60s --concurrency 8 "${headers[@]}" --json "${url[$name]}" >"$results/$name.check.json"
  after=$(script_calls)
  log "$name: 1000 requests -> $((after - before)) Redis script calls; $(jq -r '"\(.status["2xx"]) allowed, \(.status["429"]) denied, \(.errors) errors"' "$results/$name.check.json")"
done

# --- measure -----------------------------------------------------------------

loadavg() { cut -d' ' -f1 /proc/loadavg; }

hz=$(getconf CLK_TCK)
declare -A proxy_pid=([direct]="" [nginx]=${pid[nginx]} [bare-proxy]=${pid[bare-proxy]} [enforcer-allow]=${pid[enforcer-allow]} [enforcer-deny]=${pid[enforcer-deny]:-}
  [enforcer-exempt]=${pid[enforcer-exempt]})

# closed NAME ROUND: max throughput, and the CPU each process spent per
# request, sampled over the measured period less its last second (the load
# generator must still be running to be sampled). On a shared machine
# throughput moves with the neighbours; CPU time per request barely does.
closed() {
  local name=$1 r=$2 out="$results/$1.closed.$2.json"
  "$load" --concurrency "$concurrency" "${common[@]}" "${url[$name]}" >"$out" &
  local loader=$! t0 t1 p0 p1 r0 r1 u0 u1 l0 l1 c0 c1
  sleep "$warmup"
  t0=$(date +%s.%N) l0=$(ticks "$loader") p0=$(ticks ${proxy_pid[$name]}) r0=$(ticks "${pid[redis]}") u0=$(ticks "${pid[upstream]}")
  c0=$(script_calls)
  sleep $((duration - 1))
  t1=$(date +%s.%N) l1=$(ticks "$loader") p1=$(ticks ${proxy_pid[$name]}) r1=$(ticks "${pid[redis]}") u1=$(ticks "${pid[upstream]}")
  c1=$(script_calls)
  wait "$loader"
  # Requests in the sampled window: the run's rate times its length. Redis
  # script calls per request over the same window (0 for the targets that
  # make none).
  jq -n --argjson rps "$(jq .rps "$out")" --argjson t0 "$t0" --argjson t1 "$t1" --argjson hz "$hz" \
    --argjson proxy $((p1 - p0)) --argjson redis $((r1 - r0)) --argjson upstream $((u1 - u0)) --argjson load $((l1 - l0)) \
    --argjson calls $((c1 - c0)) \
    '($rps * ($t1 - $t0)) as $n
     | {proxy: $proxy, redis: $redis, upstream: $upstream, load: $load}
     | map_values(. / $hz * 1e6 / $n * 10 | round / 10)
     | . + {calls: ($calls / $n * 1000 | round / 1000)}' >"$results/$name.cpu.$r.json"
}

common=(--duration "${duration}s" --warmup "${warmup}s" "${headers[@]}" --json)
summary='"\(.rps) req/s, 2xx \(.status["2xx"]), 429 \(.status["429"]), 503 \(.status["503"]), errors \(.errors), p50 \(.latencyUs.p50)µs p99 \(.latencyUs.p99)µs p99.9 \(.latencyUs.p999)µs"'
for ((r = 1; r <= rounds; r++)); do
  busy=$(loadavg)
  log "round $r of $rounds (load average $busy on $(nproc) CPUs)"
  if awk -v l="$busy" 'BEGIN {exit !(l > 0.5)}'; then
    log "warning: other processes are using the CPUs; results will be lower and noisier"
  fi
  for name in "${targets[@]}"; do
    closed "$name" "$r"
    log "$name, closed loop:     $(jq -r "$summary" "$results/$name.closed.$r.json")"
    log "$name, CPU µs/request:  $(jq -r '"proxy \(.proxy), redis \(.redis), upstream \(.upstream), load generator \(.load); Redis calls/request \(.calls)"' "$results/$name.cpu.$r.json")"
    sleep 1
    "$load" --rate "$rate" --concurrency "$concurrency" "${common[@]}" "${url[$name]}" >"$results/$name.open.$r.json"
    log "$name, $rate req/s:  $(jq -r "$summary" "$results/$name.open.$r.json")"
    sleep 1
    # One connection, one request at a time: the path's own latency, with
    # no queueing in the proxy (half the duration is plenty).
    "$load" --concurrency 1 --duration "$((duration / 2))s" --warmup 1s "${headers[@]}" --json "${url[$name]}" \
      >"$results/$name.serial.$r.json"
    log "$name, one connection: $(jq -r "$summary" "$results/$name.serial.$r.json")"
    sleep 1
  done
done

# --- the tables ----------------------------------------------------------------

# table JQ-ROW: one markdown row per target from the medians over the rounds.
table() {
  jq -n -r --arg order "${targets[*]}" '
    def median: sort | .[(length - 1) / 2 | floor];
    def ms: if . >= 1000 or . <= -1000 then "\(. / 10 | round / 100) ms" else "\(. | round) µs" end;
    def signed: if . >= 0 then "+\(ms)" else ms end;
    def pct: "\(. * 100 | round)%";
    [inputs | {file: (input_filename | split("/") | last)} + .]
    | map(. + {name: (.file | split(".")[0]), mode: (.file | split(".")[1]), round: (.file | split(".")[2])})
    | group_by(.name)
    | map(. as $runs | {key: .[0].name, value: {
        # Throughput counts answers that are not fail-closed 503s: a 503
        # means the decision did not come back from Redis in time.
        rps: ($runs | map(select(.mode == "closed") | .rps * (1 - .status["503"] / .requests)) | median),
        unavailable: ($runs | map(select(.mode == "closed") | .status["503"] / .requests) | median),
        denied: ($runs | map(select(.mode == "closed") | .status["429"] / .requests) | median),
        cpu: ($runs | map(select(.mode == "cpu") | .proxy) | median),
        cpus: ($runs | map(select(.mode == "cpu") | {key: .round, value: .proxy}) | from_entries),
        redis: ($runs | map(select(.mode == "cpu") | .redis) | median),
        calls: ($runs | map(select(.mode == "cpu") | .calls) | median),
        open: (["p50", "p99", "p999"] | map(. as $q | {key: $q, value: ($runs | map(select(.mode == "open") | .latencyUs[$q]) | median)}) | from_entries),
        serial: (["min", "p50", "p99"] | map(. as $q | {key: $q, value: ($runs | map(select(.mode == "serial") | .latencyUs[$q]) | median)}) | from_entries)}})
    | from_entries as $r
    | ($order | split(" "))[] as $n
    | $r[$n] as $m
    | ($n == "direct") as $direct
    | '"$1"'
  ' "$results"/*.closed.*.json "$results"/*.open.*.json "$results"/*.serial.*.json "$results"/*.cpu.*.json
}
{
  echo "Maximum throughput, closed loop, $concurrency connections:"
  echo
  echo "| | Requests/s (not 503) | vs nginx | Redis calls per request | Proxy CPU per request | Above bare-proxy | Redis CPU per request | 429 | 503 (fail-closed) |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
  table '"| \($n) | \($m.rps | round) | \(if $direct then "–" else $m.rps / $r.nginx.rps | pct end)"
    + " | \($m.calls) | \(if $direct then "–" else "\($m.cpu) µs" end)"
    + " | \(if ($n | startswith("enforcer")) then "\($r["bare-proxy"].cpus as $b | [$m.cpus | to_entries[] | .value - $b[.key]] | median | . * 10 | round / 10) µs" else "–" end)"
    + " | \(if $m.redis >= 1 then "\($m.redis) µs" else "–" end)"
    + " | \($m.denied | pct) | \($m.unavailable | pct) |"'
  echo
  echo "Latency at $rate requests/s (open model), and with one connection sending one request at a time:"
  echo
  echo "| | p50 / p99 / p99.9 at $rate req/s | Added to direct | One connection: min / p50 / p99 | Added to direct |"
  echo "|---|---:|---:|---:|---:|"
  table '"| \($n) | \($m.open.p50 | ms) / \($m.open.p99 | ms) / \($m.open.p999 | ms)"
    + " | \(if $direct then "–" else "\($m.open.p50 - $r.direct.open.p50 | signed) / \($m.open.p99 - $r.direct.open.p99 | signed) / \($m.open.p999 - $r.direct.open.p999 | signed)" end)"
    + " | \($m.serial.min | ms) / \($m.serial.p50 | ms) / \($m.serial.p99 | ms)"
    + " | \(if $direct then "–" else "\($m.serial.min - $r.direct.serial.min | signed) / \($m.serial.p50 - $r.direct.serial.p50 | signed) / \($m.serial.p99 - $r.direct.serial.p99 | signed)" end) |"'
} >"$results/table.md"

# --- profile -------------------------------------------------------------------

# profile NAME PPROF-PORT BINARY: CPU and allocation profiles of NAME under
# closed-loop load, and its allocations per request (objects allocated over
# the profile's window, over the requests answered in it).
profile() {
  local name=$1 port=$2 bin=$3 secs=$((duration > 3 ? duration - 2 : 1)) total
  log "profiling $name for ${secs}s under closed-loop load"
  "$load" --concurrency "$concurrency" "${common[@]}" "${url[$name]}" >"$results/$name.profiled.json" &
  local profiled=$!
  sleep "$warmup"
  curl -sf -o "$results/$name.cpu.pprof" "http://127.0.0.1:$port/debug/pprof/profile?seconds=$secs" &
  local cpu=$!
  curl -sf -o "$results/$name.allocs.pprof" "http://127.0.0.1:$port/debug/pprof/allocs?seconds=$secs"
  wait "$cpu" "$profiled"
  go tool pprof -top -nodecount=40 "$bin" "$results/$name.cpu.pprof" >"$results/$name.cpu.txt" 2>/dev/null
  go tool pprof -top -cum -nodecount=60 "$bin" "$results/$name.cpu.pprof" >"$results/$name.cpu-cum.txt" 2>/dev/null
  go tool pprof -top -sample_index=alloc_space -nodecount=30 "$bin" "$results/$name.allocs.pprof" \
    >"$results/$name.allocs.txt" 2>/dev/null
  go tool pprof -top -sample_index=alloc_objects -nodecount=40 "$bin" "$results/$name.allocs.pprof" \
    >"$results/$name.alloc-objects.txt" 2>/dev/null
  total=$(awk '/^Showing nodes accounting for/ {print $(NF-1); exit}' "$results/$name.alloc-objects.txt")
  log "$name: $(jq -n --argjson n "${total:-0}" --argjson rps "$(jq .rps "$results/$name.profiled.json")" --argjson s "$secs" \
    '$n / ($rps * $s) | round') allocations per request (profile window; $results/$name.alloc-objects.txt)"
}

if [ "$profile" = 1 ]; then
  profile enforcer-allow "$pprof_port_allow" "$work/bin/sluice-enforcer"
  profile bare-proxy "$pprof_bare" "$work/bin/sluice-load"
  cp "$work/bin/sluice-enforcer" "$work/bin/sluice-load" "$results/"
  log "profiles: $results/{enforcer-allow,bare-proxy}.{cpu,allocs}.pprof (binaries: $results/sluice-enforcer, sluice-load)"
fi

echo
echo "$(nproc) CPUs, load generator, proxies, Redis and upstream on the same machine;"
echo "${duration}s per measurement after ${warmup}s warm-up, $rounds round(s), median shown; enforcers' GOMAXPROCS ${ENFORCER_GOMAXPROCS:-as Go sets it}; results in $results"
echo
cat "$results/table.md"
