#!/usr/bin/env bash
# The PHP-FPM flood (docs/performance.md): a pool of PHP_CHILDREN (16) fixed
# php-fpm children serving a slow endpoint (hack/php/slow.php, which holds
# its child SLOW_MS, 50 ms, like a slow export), five abusive tenants
# flooding it together at FLOOD_RATE (1500) requests/s (open model), and one
# good tenant at GOOD_RATE (10) requests/s (open model). Two enforcers in
# front of the same nginx and php-fpm (hack/php), measured one after the
# other, interleaved round by round:
#   rate          a SlidingWindowLog rule of RATE_LIMIT (20) requests/s per
#                 X-Tenant-ID, alone
#   rate+conc     the same rule plus a Concurrency rule of CONCURRENT (3)
#                 requests in flight per X-Tenant-ID on the same route
# For each: the good tenant alone (its unloaded latency), then the good
# tenant during the flood: its 2xx share and p50/p99, and the abusive
# tenants' 429 share. cmd/sluice-load sends every request and reports in
# JSON. Everything runs on 127.0.0.1; every process the script starts is
# stopped, by its PID, on exit.
#
# Settings (environment): DURATION and WARMUP (whole seconds per
# measurement; default 10 and 2), ROUNDS (1), PHP_CHILDREN (16), SLOW_MS
# (50), FLOOD_RATE (1500), GOOD_RATE (10), RATE_LIMIT (20), CONCURRENT (3),
# RESULTS (directory for the raw JSON and the table; default a new
# temporary directory, kept).
set -euo pipefail
cd "$(dirname "$0")/.."

duration=${DURATION:-10}
warmup=${WARMUP:-2}
rounds=${ROUNDS:-1}
children=${PHP_CHILDREN:-16}
slow_ms=${SLOW_MS:-50}
flood_rate=${FLOOD_RATE:-1500}
good_rate=${GOOD_RATE:-10}
rate_limit=${RATE_LIMIT:-20}
concurrent=${CONCURRENT:-3}
for v in duration warmup rounds children slow_ms flood_rate good_rate rate_limit concurrent; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "error: ${v^^} must be a whole number, got '${!v}'" >&2; exit 2; }
done
(( duration >= 2 )) || { echo "error: DURATION must be at least 2 seconds" >&2; exit 2; }
(( children >= 1 )) || { echo "error: PHP_CHILDREN must be at least 1" >&2; exit 2; }
(( flood_rate >= 1 && good_rate >= 1 )) || { echo "error: FLOOD_RATE and GOOD_RATE must be at least 1" >&2; exit 2; }
(( rate_limit >= 1 && concurrent >= 1 )) || { echo "error: RATE_LIMIT and CONCURRENT must be at least 1" >&2; exit 2; }

log() { printf '>> %s\n' "$*" >&2; }

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

# --- tools (as hack/bench-php.sh) ------------------------------------------

# php_fpm_bin prints the php-fpm binary (Debian names it php-fpmX.Y).
php_fpm_bin() {
  command -v php-fpm 2>/dev/null && return
  find /usr/sbin -maxdepth 1 -name 'php-fpm[0-9]*' 2>/dev/null | sort -V | tail -n 1
}

hack/ensure-redis.sh
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
fpm_bin=$(php_fpm_bin)
missing=()
[ -x "$nginx_bin" ] || missing+=(nginx)
[ -n "$fpm_bin" ] || missing+=(php-fpm)
# Read whole before grep -q, which stops at the first match: in a pipeline
# under pipefail the writer would then fail (SIGPIPE) and so would the test.
if [ -z "$fpm_bin" ] || ! grep -qx redis <<<"$("$fpm_bin" -m 2>/dev/null)"; then missing+=(php-redis); fi
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
  fpm_bin=$(php_fpm_bin)
  if [ -z "$fpm_bin" ] || ! grep -qx redis <<<"$("$fpm_bin" -m)"; then
    echo "error: php-fpm with the redis extension is not available" >&2
    exit 1
  fi
fi
# The packages may have started system-wide servers; this script runs its
# own and leaves those alone, but they share the CPUs.
for f in /run/nginx.pid /run/php/php*-fpm.pid; do
  if [ -s "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null; then
    log "warning: a system $(basename "$f" .pid) is running (pid $(cat "$f")); it is left alone"
  fi
done

# --- scratch space and cleanup ---------------------------------------------

work=$(mktemp -d /tmp/sluice-bench-php-flood-work.XXXXXX)
results=${RESULTS:-$(mktemp -d /tmp/sluice-bench-php-flood.XXXXXX)}
mkdir -p "$results" "$work/bin" "$work/redis" "$work/nginx" "$work/php" "$work/www"
# A reused RESULTS directory must not mix an earlier run's rounds in.
rm -f "$results"/*.json "$results"/table.md
# cleanup on exit, start and pick_port
# shellcheck source=hack/lib/bench.sh
source hack/lib/bench.sh

# --- build -------------------------------------------------------------------

log "building sluice-enforcer, sluice-policy-compile and sluice-load"
go build -o "$work/bin/sluice-enforcer" ./cmd/enforcer
go build -o "$work/bin/sluice-policy-compile" ./cmd/policy-compile # --policy-file runs it
go build -o "$work/bin/sluice-load" ./cmd/sluice-load
load=$work/bin/sluice-load

# --- the processes -------------------------------------------------------------

redis_port="" nginx_port="" rate_port="" rate_admin="" conc_port="" conc_admin=""
for v in redis_port nginx_port rate_port rate_admin conc_port conc_admin; do pick_port "$v"; done

start redis redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
  --dir "$work/redis" --daemonize no

cp hack/php/slow.php "$work/www/"
cp /etc/nginx/fastcgi.conf "$work/nginx/fastcgi.conf"
user_line="# not root: nginx runs as the current user"
fpm_user="" fpm_listen_user=""
if [ "$(id -u)" -eq 0 ]; then
  # As root, nginx's worker and php-fpm's children drop to an unprivileged
  # user, which must reach the socket and read the PHP files.
  group=$(id -gn nobody)
  user_line="user nobody $group;"
  fpm_user="user = nobody
group = $group"
  fpm_listen_user="listen.owner = nobody
listen.group = $group"
  chmod 0755 "$work" "$work/nginx" "$work/php" "$work/www"
  chmod 0644 "$work"/www/*.php
fi
sed -e "s|@DIR@|$work/nginx|g" -e "s|@ROOT@|$work/www|g" -e "s|@LISTEN@|127.0.0.1:$nginx_port|g" \
  -e "s|@SOCKET@|$work/php/php-fpm.sock|g" -e "s|@REDIS_PORT@|$redis_port|g" -e "s|@USER@|$user_line|g" \
  hack/php/nginx.conf.template >"$work/nginx/nginx.conf"
awk -v dir="$work/php" -v children="$children" -v user="$fpm_user" -v listen_user="$fpm_listen_user" '
  { gsub(/@DIR@/, dir); gsub(/@CHILDREN@/, children) }
  /^@USER@$/ { $0 = user } /^@LISTEN_USER@$/ { $0 = listen_user }
  { print }' hack/php/php-fpm.conf.template >"$work/php/php-fpm.conf"

fpm_args=(--nodaemonize --fpm-config "$work/php/php-fpm.conf")
"$fpm_bin" --test "${fpm_args[@]}" >"$work/php-fpm-check.log" 2>&1 || { cat "$work/php-fpm-check.log" >&2; exit 1; }
start php-fpm "$fpm_bin" "${fpm_args[@]}"
nginx_args=(-p "$work/nginx/" -c "$work/nginx/nginx.conf" -g "daemon off;")
# -e keeps nginx from opening the packaged error log before reading its config.
if grep -q -- '-e filename' <<<"$("$nginx_bin" -h 2>&1)"; then nginx_args+=(-e "$work/nginx/error.log"); fi
"$nginx_bin" -t "${nginx_args[@]}" >"$work/nginx-check.log" 2>&1 || { cat "$work/nginx-check.log" >&2; exit 1; }
start nginx "$nginx_bin" "${nginx_args[@]}"

# The two policies: the rate rule alone, and with a Concurrency rule beside
# it on the same route (every request matches both).
policy() { # NAME WITH-CONCURRENCY
  cat <<YAML
apiVersion: sluice.dev/v1alpha1
kind: RateLimitPolicy
metadata:
  name: $1
  namespace: bench
spec:
  selector:
    matchLabels:
      app: bench
  upstreamPort: $nginx_port
  failureMode: Closed
  timeout: 50ms
  identity:
    sources:
      - header:
          name: X-Tenant-ID
  rules:
    - name: api
      algorithm: SlidingWindowLog
      limits:
        - requests: $rate_limit
          period: 1s
YAML
  if [ "$2" = yes ]; then
    printf '    - name: exports\n      algorithm: Concurrency\n      limits:\n        - concurrent: %s\n' "$concurrent"
  fi
}
policy flood-rate no >"$work/rate.yaml"
policy flood-rate-conc yes >"$work/rate-conc.yaml"

enforcer() { # NAME PORT ADMIN POLICY
  start "$1" "$work/bin/sluice-enforcer" \
    --listen "127.0.0.1:$2" --admin-listen "127.0.0.1:$3" --debug-listen "" \
    --upstream "http://127.0.0.1:$nginx_port" --redis-url "redis://127.0.0.1:$redis_port" \
    --policy-file "$4" --log-level warn
}
enforcer enforcer-rate "$rate_port" "$rate_admin" "$work/rate.yaml"
enforcer enforcer-rate-conc "$conc_port" "$conc_admin" "$work/rate-conc.yaml"

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
wait_ready php-fpm "http://127.0.0.1:$nginx_port/slow.php"
wait_ready enforcer-rate "http://127.0.0.1:$rate_admin/readyz"
wait_ready enforcer-rate-conc "http://127.0.0.1:$conc_admin/readyz"

targets=(rate rate+conc)
declare -A url=(
  [rate]="http://127.0.0.1:$rate_port/slow.php?ms=$slow_ms"
  [rate+conc]="http://127.0.0.1:$conc_port/slow.php?ms=$slow_ms"
)

# --- measure -----------------------------------------------------------------

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
summary='"\(.rps) req/s, 2xx \(.status["2xx"]), 429 \(.status["429"]), 503 \(.status["503"]), other \(.status.other), errors \(.errors), p50 \(.latencyUs.p50)µs p99 \(.latencyUs.p99)µs max \(.latencyUs.max)µs"'
good=(--rate "$good_rate" --concurrency 16 -H 'X-Tenant-ID: good' --json)
# The flood: five tenants in turn, each at a fifth of FLOOD_RATE; its
# in-flight bound is far above what 16 children can hold.
flood=(--rate "$flood_rate" --concurrency 512 -H 'X-Tenant-ID: abuser-{tenant}' --tenants 5 --json)
: >"$results/loadavg.txt"
for ((r = 1; r <= rounds; r++)); do
  log "round $r of $rounds (load average $(loadavg) on $(nproc) CPUs)"
  echo "round $r: load average $(loadavg) at the start" >>"$results/loadavg.txt"
  for name in "${targets[@]}"; do
    f=${name/+/-}
    # The good tenant alone: its unloaded latency through this enforcer.
    "$load" "${good[@]}" --warmup 1s --duration "${duration}s" "${url[$name]}" >"$results/$f.alone.$r.json"
    log "$name, good tenant alone:      $(jq -r "$summary" "$results/$f.alone.$r.json")"
    # The flood starts first and ends last: the good tenant's measured
    # seconds all fall inside the flood's.
    "$load" "${flood[@]}" --warmup "${warmup}s" --duration "$((duration + 2))s" "${url[$name]}" \
      >"$results/$f.flood.$r.json" &
    flooder=$!
    sleep 1
    "$load" "${good[@]}" --warmup "${warmup}s" --duration "${duration}s" "${url[$name]}" >"$results/$f.good.$r.json"
    wait "$flooder"
    log "$name, good tenant in the flood: $(jq -r "$summary" "$results/$f.good.$r.json")"
    log "$name, the flood:                $(jq -r "$summary" "$results/$f.flood.$r.json")"
    # Let the queues drain and the sliding windows empty.
    sleep 2
  done
  echo "round $r: load average $(loadavg) at the end" >>"$results/loadavg.txt"
done

# --- the table -------------------------------------------------------------------

# One row per configuration: the good tenant's requests summed over the
# rounds, latencies the median of the rounds.
jq -n -r --arg order "${targets[*]}" '
  def median: sort | .[(length - 1) / 2 | floor];
  def ms: "\(. / 100 | round / 10) ms";
  def pct: "\(. * 1000 | floor / 10)%";
  [inputs | {file: (input_filename | split("/") | last)} + .]
  | map(. + {name: (.file | split(".")[0] | sub("-conc$"; "+conc")), mode: (.file | split(".")[1])})
  | group_by(.name) | map({key: .[0].name, value: group_by(.mode) | map({key: .[0].mode, value: .}) | from_entries})
  | from_entries as $r
  | ($order | split(" "))[] as $n
  | $r[$n] as $m
  | ($m.good | map(.requests + .errors) | add) as $sent
  | ($m.good | map(.status["2xx"]) | add) as $ok
  | "| \($n) | \($ok) of \($sent) (\($ok / $sent | pct)) | \($m.good | map(.latencyUs.p50) | median | ms) / \($m.good | map(.latencyUs.p99) | median | ms)"
    + " | \($m.alone | map(.latencyUs.p50) | median | ms) / \($m.alone | map(.latencyUs.p99) | median | ms)"
    + " | \($m.flood | map(.status["429"]) | add) of \($m.flood | map(.requests + .errors) | add) (\(($m.flood | map(.status["429"]) | add) / ($m.flood | map(.requests + .errors) | add) | pct))"
    + " | \($m.flood | map(.status["2xx"] / .requests * .rps) | median | round)/s |"
' "$results"/*.json >"$results/rows.md"
{
  echo "| | good tenant: 2xx | good tenant in the flood: p50 / p99 | good tenant alone: p50 / p99 | abusive tenants: 429 | abusive tenants: 2xx |"
  echo "|---|---:|---:|---:|---:|---:|"
  cat "$results/rows.md"
} >"$results/table.md"

echo
echo "$(nproc) CPUs, load generators, enforcers, nginx, php-fpm ($children children, ${slow_ms} ms per request) and Redis on the same machine;"
echo "flood $flood_rate req/s from 5 tenants, good tenant $good_rate req/s; limits $rate_limit req/s per tenant, and $concurrent in flight in rate+conc;"
echo "${duration}s per measurement, $rounds round(s); load average (1, 5, 15 min):"
sed 's/^/  /' "$results/loadavg.txt"
echo "results in $results"
echo
cat "$results/table.md"
