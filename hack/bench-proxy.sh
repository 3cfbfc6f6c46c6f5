#!/usr/bin/env bash
# Proxy throughput and latency (docs/performance.md): the same load, from
# cmd/sluice-load, against
#   direct          the trivial upstream (sluice-load upstream), no proxy
#   nginx           nginx, 1 worker, keep-alive upstream, limit_req that never denies
#   enforcer-allow  sluice-enforcer, a limit never reached: one Redis decision per request
#   enforcer-deny   sluice-enforcer, half the tenants over their limit: about 50% 429
# each measured twice: maximum throughput (closed loop, CONCURRENCY
# connections) and latency at a fixed RATE (open model). Requests rotate
# X-Tenant-ID among TENANTS tenants. Everything runs on this machine, on
# loopback, and every process it starts is stopped on exit.
#
# Settings (environment): DURATION and WARMUP (whole seconds, per
# measurement; default 10 and 2), CONCURRENCY (64), RATE (2000), TENANTS
# (10), ROUNDS (1: more rounds interleave the targets and report the median),
# PROFILE=1 (after the rounds, profile the enforcer under closed-loop load:
# CPU and allocations, through a pprof listener compiled in with a build
# overlay), RESULTS (directory for the raw JSON, profiles and table; default
# a new temporary directory, kept).
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
for v in duration warmup concurrency rate tenants rounds; do
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
      if apt-cache policy nginx-light 2>/dev/null | grep -q 'Candidate: [0-9]'; then pkgs+=(nginx-light); else pkgs+=(nginx); fi
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
pids=()
cleanup() {
  local status=$?
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start NAME CMD... runs CMD in the background, its output in NAME.log.
start() {
  local name=$1
  shift
  "$@" >"$work/$name.log" 2>&1 &
  pids+=($!)
}

used_ports=" "
# pick_port VAR sets VAR to a loopback port nothing listens on.
pick_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 40000))
    [[ $used_ports == *" $p "* ]] && continue
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      used_ports+="$p "
      printf -v "$1" '%s' "$p"
      return
    fi
  done
}

# --- build -------------------------------------------------------------------

build_flags=()
if [ "$profile" = 1 ]; then
  pick_port pprof_port
  # A pprof listener for the profiling run, added to the enforcer's main
  # package at build time only; the source tree is not touched.
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
  printf '{"Replace": {"%s/cmd/enforcer/zz_bench_pprof.go": "%s/bench_pprof.go"}}\n' "$repo" "$work" >"$work/overlay.json"
  build_flags=(-overlay "$work/overlay.json")
fi
log "building sluice-enforcer and sluice-load"
go build "${build_flags[@]}" -o "$work/bin/sluice-enforcer" ./cmd/enforcer
go build -o "$work/bin/sluice-load" ./cmd/sluice-load
load=$work/bin/sluice-load

# --- the processes -------------------------------------------------------------

pick_port redis_port
pick_port upstream_port
pick_port nginx_port
pick_port allow_port
pick_port allow_admin
pick_port deny_port
pick_port deny_admin

start redis redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
  --dir "$work/redis" --daemonize no
start upstream "$load" upstream --listen "127.0.0.1:$upstream_port" --exit-after 2h

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
if "$nginx_bin" -h 2>&1 | grep -q -- '-e filename'; then nginx_args+=(-e "$work/nginx/error.log"); fi
"$nginx_bin" -t "${nginx_args[@]}" >"$work/nginx-check.log" 2>&1 || { cat "$work/nginx-check.log" >&2; exit 1; }
start nginx "$nginx_bin" "${nginx_args[@]}"

# Two policies on the same route and identity. allow: a limit never reached,
# so each request is one Redis decision that admits it. deny: tenants 0..n/2-1
# have that limit as an override; the others one request per 744h, so after
# their first request every one of theirs is refused.
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

enforcer() { # NAME PORT ADMIN POLICY
  start "$1" env ${pprof_port:+SLUICE_BENCH_PPROF=127.0.0.1:$pprof_port} "$work/bin/sluice-enforcer" \
    --listen "127.0.0.1:$2" --admin-listen "127.0.0.1:$3" \
    --upstream "http://127.0.0.1:$upstream_port" --redis-url "redis://127.0.0.1:$redis_port" \
    --policy-file "$4" --log-level warn
}
enforcer enforcer-allow "$allow_port" "$allow_admin" "$work/allow.yaml"
pprof_port_allow=${pprof_port:-}
# Only the allow enforcer gets the profiling listener.
pprof_port=
enforcer enforcer-deny "$deny_port" "$deny_admin" "$work/deny.yaml"

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
wait_ready enforcer-allow "http://127.0.0.1:$allow_admin/readyz"
wait_ready enforcer-deny "http://127.0.0.1:$deny_admin/readyz"

targets=(direct nginx enforcer-allow enforcer-deny)
declare -A url=(
  [direct]="http://127.0.0.1:$upstream_port/"
  [nginx]="http://127.0.0.1:$nginx_port/"
  [enforcer-allow]="http://127.0.0.1:$allow_port/"
  [enforcer-deny]="http://127.0.0.1:$deny_port/"
)
headers=(-H 'X-Tenant-ID: tenant-{tenant}' --tenants "$tenants")

# --- check that the enforcers decide every request in Redis ----------------

script_calls() {
  redis-cli -p "$redis_port" info commandstats | tr -d '\r' |
    awk -F'[:=,]' '/^cmdstat_(evalsha|eval):/ {n += $3} END {print n + 0}'
}
for name in enforcer-allow enforcer-deny; do
  before=$(script_calls)
  "$load" --requests 1000 --warmup 0 --duration 60s --concurrency 8 "${headers[@]}" --json "${url[$name]}" >"$results/$name.check.json"
  after=$(script_calls)
  log "$name: 1000 requests -> $((after - before)) Redis script calls; $(jq -r '"\(.status["2xx"]) allowed, \(.status["429"]) denied, \(.errors) errors"' "$results/$name.check.json")"
done

# --- measure -----------------------------------------------------------------

loadavg() { cut -d' ' -f1 /proc/loadavg; }
common=(--concurrency "$concurrency" --duration "${duration}s" --warmup "${warmup}s" "${headers[@]}" --json)
summary='"\(.rps) req/s, 2xx \(.status["2xx"]), 429 \(.status["429"]), errors \(.errors), p50 \(.latencyUs.p50)µs p99 \(.latencyUs.p99)µs p99.9 \(.latencyUs.p999)µs"'
for ((r = 1; r <= rounds; r++)); do
  busy=$(loadavg)
  log "round $r of $rounds (load average $busy on $(nproc) CPUs)"
  if awk -v l="$busy" 'BEGIN {exit !(l > 0.5)}'; then
    log "warning: other processes are using the CPUs; results will be lower and noisier"
  fi
  for name in "${targets[@]}"; do
    "$load" "${common[@]}" "${url[$name]}" >"$results/$name.closed.$r.json"
    log "$name, closed loop:     $(jq -r "$summary" "$results/$name.closed.$r.json")"
    sleep 1
    "$load" --rate "$rate" "${common[@]}" "${url[$name]}" >"$results/$name.open.$r.json"
    log "$name, $rate req/s:  $(jq -r "$summary" "$results/$name.open.$r.json")"
    sleep 1
  done
done

# --- the table -----------------------------------------------------------------

{
  echo "| | Max throughput (req/s, $concurrency connections) | vs nginx | Denied | p50 / p99 / p99.9 at $rate req/s | Added to direct: p50 / p99 / p99.9 |"
  echo "|---|---:|---:|---:|---:|---:|"
  jq -n -r --arg order "${targets[*]}" '
    def median: sort | .[(length - 1) / 2 | floor];
    def ms: if . >= 1000 or . <= -1000 then "\(. / 10 | round / 100) ms" else "\(. | round) µs" end;
    def signed: if . >= 0 then "+\(ms)" else ms end;
    [inputs | {file: (input_filename | split("/") | last)} + .]
    | map(. + {name: (.file | split(".")[0]), mode: (.file | split(".")[1])})
    | map(select(.mode == "closed" or .mode == "open"))
    | group_by(.name)
    | map({key: .[0].name, value: {
        rps: (map(select(.mode == "closed") | .rps) | median),
        denied: (map(select(.mode == "closed") | .status["429"] / .requests) | median),
        p50: (map(select(.mode == "open") | .latencyUs.p50) | median),
        p99: (map(select(.mode == "open") | .latencyUs.p99) | median),
        p999: (map(select(.mode == "open") | .latencyUs.p999) | median)}})
    | from_entries as $r
    | ($order | split(" "))[] as $n
    | $r[$n] as $m
    | "| \($n) | \($m.rps | round) | \(if $n == "direct" then "–" else "\($m.rps / $r.nginx.rps * 100 | round)%" end)"
      + " | \($m.denied * 100 | round)% | \($m.p50 | ms) / \($m.p99 | ms) / \($m.p999 | ms)"
      + " | \(if $n == "direct" then "–" else "\($m.p50 - $r.direct.p50 | signed) / \($m.p99 - $r.direct.p99 | signed) / \($m.p999 - $r.direct.p999 | signed)" end) |"
  ' "$results"/*.closed.*.json "$results"/*.open.*.json
} >"$results/table.md"

# --- profile -------------------------------------------------------------------

if [ "$profile" = 1 ]; then
  secs=$((duration > 3 ? duration - 2 : 1))
  log "profiling enforcer-allow for ${secs}s under closed-loop load"
  "$load" "${common[@]}" "${url[enforcer-allow]}" >"$results/enforcer-allow.profiled.json" &
  profiled=$!
  sleep "$warmup"
  curl -sf -o "$results/enforcer-allow.cpu.pprof" "http://127.0.0.1:$pprof_port_allow/debug/pprof/profile?seconds=$secs" &
  cpu=$!
  curl -sf -o "$results/enforcer-allow.allocs.pprof" "http://127.0.0.1:$pprof_port_allow/debug/pprof/allocs?seconds=$secs"
  wait "$cpu" "$profiled"
  go tool pprof -top -nodecount=40 "$work/bin/sluice-enforcer" "$results/enforcer-allow.cpu.pprof" \
    >"$results/enforcer-allow.cpu.txt" 2>/dev/null
  go tool pprof -top -cum -nodecount=60 "$work/bin/sluice-enforcer" "$results/enforcer-allow.cpu.pprof" \
    >"$results/enforcer-allow.cpu-cum.txt" 2>/dev/null
  go tool pprof -top -sample_index=alloc_space -nodecount=30 "$work/bin/sluice-enforcer" \
    "$results/enforcer-allow.allocs.pprof" >"$results/enforcer-allow.allocs.txt" 2>/dev/null
  cp "$work/bin/sluice-enforcer" "$results/sluice-enforcer"
  log "profiles: $results/enforcer-allow.{cpu,allocs}.pprof (binary: $results/sluice-enforcer)"
fi

echo
echo "$(nproc) CPUs, load generator, proxies, Redis and upstream on the same machine;"
echo "${duration}s per measurement after ${warmup}s warm-up, $rounds round(s), median shown; results in $results"
echo
cat "$results/table.md"
