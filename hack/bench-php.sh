#!/usr/bin/env bash
# PHP-FPM behind the enforcer (docs/performance.md): the users' own case. A
# PHP application (Debian's php-fpm and php-redis, nginx with FastCGI; the
# files are in hack/php) measured with the same load from cmd/sluice-load as
#   php-plain              index.php, no limiter code
#   php-limited            limited.php: a sliding-window log in Lua, run
#                          through phpredis' evalSha per request, as articles
#                          show it; a new Redis connection per request
#   php-limited-pconnect   the same with phpredis' persistent connection
#   enforcer-swlog         sluice-enforcer in front of php-plain: a
#                          SlidingWindowLog rule per X-Tenant-ID, the same
#                          limit as limited.php
#   enforcer-tokenbucket   the same with a TokenBucket rule
#   enforcer-exempt        the enforcer whose one rule exempts every request:
#                          its proxy path alone, no Redis decision (where the
#                          time goes)
# Every limit is one never reached (every request is one Redis decision that
# admits it), and both the enforcer (failureMode Closed) and limited.php
# answer 503 when a decision does not come back within 50 ms. Each target is
# measured three ways: maximum throughput (closed loop, CONCURRENCY
# connections, with the CPU each process spends per request), latency at a
# fixed RATE (open model), and one connection sending one request at a time;
# next to each, the Redis commands per request from INFO commandstats.
# Requests rotate X-Tenant-ID among TENANTS tenants. Everything runs on
# 127.0.0.1; every process the script starts is stopped, by its PID, on exit.
#
# Settings (environment): DURATION and WARMUP (whole seconds, per
# measurement; default 10 and 2), CONCURRENCY (64), RATE (1000), TENANTS
# (10), ROUNDS (1: more rounds interleave the targets and report medians),
# PHP_CHILDREN (php-fpm's fixed number of children, 8), RESULTS (directory
# for the raw JSON and the table; default a new temporary directory, kept).
set -euo pipefail
cd "$(dirname "$0")/.."

duration=${DURATION:-10}
warmup=${WARMUP:-2}
concurrency=${CONCURRENCY:-64}
rate=${RATE:-1000}
tenants=${TENANTS:-10}
rounds=${ROUNDS:-1}
children=${PHP_CHILDREN:-8}
for v in duration warmup concurrency rate tenants rounds children; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "error: ${v^^} must be a whole number, got '${!v}'" >&2; exit 2; }
done
(( duration >= 2 )) || { echo "error: DURATION must be at least 2 seconds" >&2; exit 2; }
(( tenants >= 1 )) || { echo "error: TENANTS must be at least 1" >&2; exit 2; }
(( children >= 1 )) || { echo "error: PHP_CHILDREN must be at least 1" >&2; exit 2; }

log() { printf '>> %s\n' "$*" >&2; }

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

# --- tools -----------------------------------------------------------------

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

work=$(mktemp -d /tmp/sluice-bench-php-work.XXXXXX)
results=${RESULTS:-$(mktemp -d /tmp/sluice-bench-php.XXXXXX)}
mkdir -p "$results" "$work/bin" "$work/redis" "$work/nginx" "$work/php" "$work/www"
# A reused RESULTS directory must not mix an earlier run's rounds into the medians.
rm -f "$results"/*.closed.*.json "$results"/*.open.*.json "$results"/*.serial.*.json \
  "$results"/*.cpu.*.json "$results"/*.calls.json
# cleanup on exit, start, pick_port and ticks
# shellcheck source=hack/lib/bench.sh
source hack/lib/bench.sh

# --- build -------------------------------------------------------------------

log "building sluice-enforcer, sluice-policy-compile and sluice-load"
go build -o "$work/bin/sluice-enforcer" ./cmd/enforcer
go build -o "$work/bin/sluice-policy-compile" ./cmd/policy-compile # --policy-file runs it
go build -o "$work/bin/sluice-load" ./cmd/sluice-load
load=$work/bin/sluice-load

# --- the processes -------------------------------------------------------------

redis_port="" nginx_port="" swlog_port="" swlog_admin="" tb_port="" tb_admin="" exempt_port="" exempt_admin=""
pick_port redis_port
pick_port nginx_port
pick_port swlog_port
pick_port swlog_admin
pick_port tb_port
pick_port tb_admin
pick_port exempt_port
pick_port exempt_admin

start redis redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
  --dir "$work/redis" --daemonize no

cp hack/php/index.php hack/php/limited.php "$work/www/"
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

# The enforcer's policies in front of index.php: the limit of limited.php
# (100000 requests per second per tenant, never reached) as a
# SlidingWindowLog rule, a TokenBucket rule never reached, and a rule that
# exempts every request.
policy_head() { # NAME
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
  upstreamPort: $nginx_port
  failureMode: Closed
  timeout: 50ms
  identity:
    sources:
      - header:
          name: X-Tenant-ID
  rules:
EOF
}
policy() { # NAME ALGORITHM REQUESTS
  policy_head "$1"
  printf '    - name: api\n      algorithm: %s\n      limits:\n        - requests: %s\n          period: 1s\n' "$2" "$3"
}
policy bench-swlog SlidingWindowLog 100000 >"$work/swlog.yaml"
policy bench-tokenbucket TokenBucket 1000000000000 >"$work/tokenbucket.yaml"
{
  policy_head bench-exempt
  printf '    - name: all\n      match:\n        paths:\n          - prefix: /\n      exempt: true\n'
} >"$work/exempt.yaml"

enforcer() { # NAME PORT ADMIN POLICY
  start "$1" "$work/bin/sluice-enforcer" \
    --listen "127.0.0.1:$2" --admin-listen "127.0.0.1:$3" --debug-listen "" \
    --upstream "http://127.0.0.1:$nginx_port" --redis-url "redis://127.0.0.1:$redis_port" \
    --policy-file "$4" --log-level warn
}
enforcer enforcer-swlog "$swlog_port" "$swlog_admin" "$work/swlog.yaml"
enforcer enforcer-tokenbucket "$tb_port" "$tb_admin" "$work/tokenbucket.yaml"
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
wait_ready php-fpm "http://127.0.0.1:$nginx_port/index.php"
wait_ready php-fpm "http://127.0.0.1:$nginx_port/limited.php"
wait_ready enforcer-swlog "http://127.0.0.1:$swlog_admin/readyz"
wait_ready enforcer-tokenbucket "http://127.0.0.1:$tb_admin/readyz"
wait_ready enforcer-exempt "http://127.0.0.1:$exempt_admin/readyz"

targets=(php-plain php-limited php-limited-pconnect enforcer-swlog enforcer-tokenbucket enforcer-exempt)
declare -A url=(
  [php-plain]="http://127.0.0.1:$nginx_port/index.php"
  [php-limited]="http://127.0.0.1:$nginx_port/limited.php"
  [php-limited-pconnect]="http://127.0.0.1:$nginx_port/limited-pconnect.php"
  [enforcer-swlog]="http://127.0.0.1:$swlog_port/index.php"
  [enforcer-tokenbucket]="http://127.0.0.1:$tb_port/index.php"
  [enforcer-exempt]="http://127.0.0.1:$exempt_port/index.php"
)
# The proxy in front of nginx, whose CPU is counted apart.
declare -A front_pid=([php-plain]="" [php-limited]="" [php-limited-pconnect]=""
  [enforcer-swlog]=${pid[enforcer-swlog]} [enforcer-tokenbucket]=${pid[enforcer-tokenbucket]} [enforcer-exempt]=${pid[enforcer-exempt]})
headers=(-H 'X-Tenant-ID: tenant-{tenant}' --tenants "$tenants")

# --- Redis commands per request --------------------------------------------

# Redis counts the commands a Lua script runs in its command statistics
# too, though they cost no round trip: the names come from the scripts.
mapfile -t in_script < <(grep -ohE "redis\.p?call\(['\"][A-Za-z]+" hack/php/limited.php enforcer/limiter/*.lua |
  sed -E "s/.*['\"]//" | tr '[:upper:]' '[:lower:]' | sort -u)
# cmdstats prints "COMMAND CALLS" for every command Redis has run, but INFO.
cmdstats() {
  redis-cli -p "$redis_port" info commandstats | tr -d '\r' |
    awk -F'[:=,]' '/^cmdstat_/ && $1 != "cmdstat_info" {sub(/^cmdstat_/, "", $1); print $1, $3}'
}
# redis_calls prints "SCRIPTS SENT": the script calls (EVAL, EVALSHA), and
# all commands clients sent: script calls included, what scripts ran not.
redis_calls() {
  cmdstats | awk -v inner=" ${in_script[*]} " '
    $1 == "eval" || $1 == "evalsha" {s += $2}
    index(inner, " " $1 " ") == 0 {sent += $2}
    END {print s + 0, sent + 0}'
}
# Exact counts: 2,000 requests with nothing else sent, at the closed loop's
# concurrency, after 200 that load the scripts (the first decisions on new
# connections find them missing, get NOSCRIPT and send EVAL).
for name in "${targets[@]}"; do
  "$load" --requests 200 --warmup 0 --duration 60s --concurrency "$concurrency" "${headers[@]}" --json "${url[$name]}" >/dev/null
  before=$(cmdstats)
  "$load" --requests 2000 --warmup 0 --duration 60s --concurrency "$concurrency" "${headers[@]}" --json "${url[$name]}" \
    >"$results/$name.check.json"
  after=$(cmdstats)
  n=$(jq '.requests + .errors' "$results/$name.check.json")
  # Per command, what each request cost: {"evalsha": 1, "zadd": 1, ...}.
  awk -v n="$n" 'NR == FNR {b[$1] = $2; next} $2 > b[$1] {printf "%s %s\n", $1, ($2 - b[$1]) / n}' \
    <(echo "$before") <(echo "$after") |
    jq -R -n --argjson n "$n" --arg inner " ${in_script[*]} " '
      [inputs | split(" ") | {key: .[0], value: (.[1] | tonumber * 1000 | round / 1000)}] | from_entries as $c
      | {requests: $n, commands: $c,
         scripts: ([$c.eval, $c.evalsha] | map(. // 0) | add),
         sent: ($c | to_entries | map(.key as $k | select($inner | contains(" \($k) ") | not) | .value) | add // 0)}' \
    >"$results/$name.calls.json"
  log "$name: $n requests; per request $(jq -r '"\(.sent) commands sent, \(.scripts) of them script calls; all commands: \(.commands | to_entries | map("\(.key) \(.value)") | join(", "))"' "$results/$name.calls.json"); $(jq -r '"\(.status["2xx"]) 2xx, \(.status["429"]) 429, \(.status["503"]) 503, \(.errors) errors"' "$results/$name.check.json")"
done

# --- measure -----------------------------------------------------------------

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
# cpu_times prints "STEAL TOTAL" clock ticks of all CPUs since boot: time the
# hypervisor gave to other virtual machines, and all time.
cpu_times() {
  local -a f
  read -r -a f </proc/stat
  echo "${f[8]} $((f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7] + f[8]))"
}

hz=$(getconf CLK_TCK)

# closed NAME ROUND: max throughput; the CPU each process spent and the Redis
# commands run per request, sampled over the measured period less its last
# second (the load generator must still be running to be sampled).
closed() {
  local name=$1 r=$2 out="$results/$1.closed.$2.json"
  "$load" --concurrency "$concurrency" "${common[@]}" "${url[$name]}" >"$out" &
  local loader=$! t0 t1 e0 e1 n0 n1 f0 f1 r0 r1 l0 l1 s0 s1 a0 a1
  sleep "$warmup"
  t0=$(date +%s.%N) l0=$(ticks "$loader") e0=$(ticks "${front_pid[$name]}") n0=$(ticks "${pid[nginx]}")
  f0=$(ticks "${pid[php-fpm]}") r0=$(ticks "${pid[redis]}")
  read -r s0 a0 < <(redis_calls)
  sleep $((duration - 1))
  t1=$(date +%s.%N) l1=$(ticks "$loader") e1=$(ticks "${front_pid[$name]}") n1=$(ticks "${pid[nginx]}")
  f1=$(ticks "${pid[php-fpm]}") r1=$(ticks "${pid[redis]}")
  read -r s1 a1 < <(redis_calls)
  wait "$loader"
  # Requests in the sampled window: the run's rate times its length.
  jq -n --argjson rps "$(jq .rps "$out")" --argjson t0 "$t0" --argjson t1 "$t1" --argjson hz "$hz" \
    --argjson enforcer $((e1 - e0)) --argjson nginx $((n1 - n0)) --argjson php $((f1 - f0)) \
    --argjson redis $((r1 - r0)) --argjson load $((l1 - l0)) --argjson scripts $((s1 - s0)) --argjson sent $((a1 - a0)) '
    ($rps * ($t1 - $t0)) as $n
    | {enforcer: $enforcer, nginx: $nginx, php: $php, redis: $redis, load: $load}
    | map_values(. / $hz * 1e6 / $n * 10 | round / 10)
    | . + {scriptsPerRequest: ($scripts / $n * 100 | round / 100), sentPerRequest: ($sent / $n * 100 | round / 100)}' \
    >"$results/$name.cpu.$r.json"
}

common=(--duration "${duration}s" --warmup "${warmup}s" "${headers[@]}" --json)
summary='"\(.rps) req/s, 2xx \(.status["2xx"]), 429 \(.status["429"]), 503 \(.status["503"]), other \(.status.other), errors \(.errors), p50 \(.latencyUs.p50)µs p99 \(.latencyUs.p99)µs p99.9 \(.latencyUs.p999)µs"'
: >"$results/loadavg.txt"
for ((r = 1; r <= rounds; r++)); do
  busy=$(loadavg)
  read -r st0 all0 < <(cpu_times)
  log "round $r of $rounds (load average $busy on $(nproc) CPUs)"
  for name in "${targets[@]}"; do
    closed "$name" "$r"
    log "$name, closed loop:     $(jq -r "$summary" "$results/$name.closed.$r.json")"
    log "$name, per request:     $(jq -r '"CPU µs: enforcer \(.enforcer), nginx \(.nginx), php-fpm \(.php), redis \(.redis), load generator \(.load); Redis commands sent \(.sentPerRequest), script calls \(.scriptsPerRequest)"' "$results/$name.cpu.$r.json")"
    sleep 1
    "$load" --rate "$rate" --concurrency "$concurrency" "${common[@]}" "${url[$name]}" >"$results/$name.open.$r.json"
    log "$name, $rate req/s:  $(jq -r "$summary" "$results/$name.open.$r.json")"
    sleep 1
    "$load" --concurrency 1 --duration "$((duration / 2))s" --warmup 1s "${headers[@]}" --json "${url[$name]}" \
      >"$results/$name.serial.$r.json"
    log "$name, one connection: $(jq -r "$summary" "$results/$name.serial.$r.json")"
    sleep 1
  done
  read -r st1 all1 < <(cpu_times)
  steal=$(( (st1 - st0) * 100 / (all1 - all0 > 0 ? all1 - all0 : 1) ))
  echo "round $r: load average $busy at the start, $(loadavg) at the end; CPU steal $steal%" >>"$results/loadavg.txt"
  log "round $r: CPU steal (time the hypervisor gave other machines) $steal%"
done

# --- the tables ----------------------------------------------------------------

# table JQ-ROW: one markdown row per target from the medians over the rounds.
table() {
  jq -n -r --arg order "${targets[*]}" '
    def median: sort | .[(length - 1) / 2 | floor];
    def ms: if . >= 1000 then "\(. / 10 | round / 100) ms" else "\(. | round) µs" end;
    def pct: "\(. * 100 | round)%";
    def two: . * 100 | round / 100 | tostring | if test("\\.") then . else . + ".0" end;
    # vs($b): throughput against target $b, the median and, with more
    # rounds, the range of the ratios round by round.
    def vs($b): (.rps / $b.rps | pct) + (. as $a | [$a.rounds | keys[] as $k | $a.rounds[$k] / $b.rounds[$k]]
      | if length > 1 then " (\(min | pct)–\(max | pct))" else "" end);
    def calls: "\(.sent | two) (\(.scripts | two))";
    [inputs | {file: (input_filename | split("/") | last)} + .]
    | map(. + {name: (.file | split(".")[0]), mode: (.file | split(".")[1])})
    | group_by(.name)
    | map(. as $runs | {key: .[0].name, value: {
        # Throughput counts the answers that admitted a request: a 503 is a
        # decision that did not come back in time.
        rps: ($runs | map(select(.mode == "closed") | .rps * .status["2xx"] / .requests) | median),
        rounds: ($runs | map(select(.mode == "closed") | {key: (.file | split(".")[2]), value: (.rps * .status["2xx"] / .requests)}) | from_entries),
        failed: ($runs | map(select(.mode == "closed") | (.requests - .status["2xx"]) / .requests) | median),
        cpu: (["enforcer", "nginx", "php", "redis"] | map(. as $p | {key: $p, value: ($runs | map(select(.mode == "cpu") | .[$p]) | median)}) | from_entries),
        sampled: ($runs | map(select(.mode == "cpu") | .sentPerRequest) | median),
        exact: ($runs | map(select(.mode == "calls")) | .[0]),
        open: (["p50", "p99", "p999"] | map(. as $q | {key: $q, value: ($runs | map(select(.mode == "open") | .latencyUs[$q]) | median)}) | from_entries),
        serial: (["min", "p50", "p99"] | map(. as $q | {key: $q, value: ($runs | map(select(.mode == "serial") | .latencyUs[$q]) | median)}) | from_entries)}})
    | from_entries as $r
    | ($order | split(" "))[] as $n
    | $r[$n] as $m
    | '"$1"'
  ' "$results"/*.closed.*.json "$results"/*.open.*.json "$results"/*.serial.*.json "$results"/*.cpu.*.json "$results"/*.calls.json
}
# shellcheck disable=SC2016 # the single-quoted arguments are jq, not shell
{
  echo "Maximum throughput, closed loop, $concurrency connections (Redis commands sent per request, script calls in brackets, counted over 2,000 requests and sampled during the run; CPU per request by process):"
  echo
  echo "| | Requests/s (2xx) | vs php-limited (by round) | vs php-limited-pconnect (by round) | Redis commands per request (script calls) | CPU per request: enforcer / nginx / php-fpm / Redis | CPU per request, the four | not 2xx |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
  table '"| \($n) | \($m.rps | round) | \($m | vs($r["php-limited"])) | \($m | vs($r["php-limited-pconnect"])) | \($m.exact | calls); sampled \($m.sampled | two)"
    + " | \(if $m.cpu.enforcer > 0 then "\($m.cpu.enforcer) µs" else "–" end) / \($m.cpu.nginx) µs / \($m.cpu.php) µs / \(if $m.cpu.redis >= 1 then "\($m.cpu.redis) µs" else "–" end)"
    + " | \([$m.cpu[]] | add * 10 | round / 10) µs | \($m.failed * 1000 | round / 10)% |"'
  echo
  echo "Latency at $rate requests/s (open model), and with one connection sending one request at a time:"
  echo
  echo "| | Redis commands per request (script calls) | p50 / p99 / p99.9 at $rate req/s | One connection: min / p50 / p99 |"
  echo "|---|---:|---:|---:|"
  table '"| \($n) | \($m.exact | calls) | \($m.open.p50 | ms) / \($m.open.p99 | ms) / \($m.open.p999 | ms)"
    + " | \($m.serial.min | ms) / \($m.serial.p50 | ms) / \($m.serial.p99 | ms) |"'
} >"$results/table.md"

echo
echo "$(nproc) CPUs, load generator, enforcer, nginx, php-fpm ($children children) and Redis on the same machine;"
echo "${duration}s per measurement after ${warmup}s warm-up, $rounds round(s), median shown; load average (1, 5, 15 min) and CPU steal:"
sed 's/^/  /' "$results/loadavg.txt"
echo "results in $results"
echo
cat "$results/table.md"
