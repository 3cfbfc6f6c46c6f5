# Helpers the benchmark scripts share (hack/bench-proxy.sh, bench-grpc.sh,
# bench-php.sh). Source it once the script has made its scratch directory,
# $work: every process started with start is stopped on exit, by PID, and
# $work is removed.

# shellcheck shell=bash

pids=()
cleanup() {
  local status=$?
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start NAME CMD... runs CMD in the background, its output in NAME.log, and
# remembers its pid as pid[NAME].
declare -A pid
start() {
  local name=$1
  shift
  "$@" >"$work/$name.log" 2>&1 &
  pids+=($!)
  pid[$name]=$!
}

used_ports=" "
# Ports below the ephemeral range, which outgoing connections (and servers
# asking for port 0) take from, so no other program can be handed ours.
read -r ephemeral_low _ </proc/sys/net/ipv4/ip_local_port_range
# pick_port VAR sets VAR to a loopback port nothing listens on.
pick_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % (ephemeral_low > 21000 ? ephemeral_low - 20000 : 1000)))
    [[ $used_ports == *" $p "* ]] && continue
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      used_ports+="$p "
      printf -v "$1" '%s' "$p"
      return
    fi
  done
}

# ticks PID... is the CPU time (user + system, in clock ticks) of the
# processes and their children (nginx's worker, php-fpm's children), read
# from /proc without starting a process, so that sampling stays quick on a
# busy machine.
ticks() {
  local p q total=0 stat kids
  local -a f
  for p in "$@"; do
    kids=()
    # One line, no newline at its end: read reports EOF after filling kids.
    if [ -r "/proc/$p/task/$p/children" ]; then read -r -a kids <"/proc/$p/task/$p/children" || true; fi
    for q in "$p" "${kids[@]}"; do
      read -r stat 2>/dev/null <"/proc/$q/stat" || continue
      read -r -a f <<<"${stat##*) }"
      total=$((total + f[11] + f[12]))
    done
  done
  echo "$total"
}
