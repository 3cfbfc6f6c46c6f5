#!/usr/bin/env bash
# Compares the limiter and proxy benchmarks of two revisions with benchstat.
#
#   hack/bench-compare.sh OLD [NEW] [COUNT]     NEW defaults to HEAD, COUNT to 10
#
# Each revision is checked out into a temporary worktree and its test binaries
# are built once; the runs then alternate (old, new, old, new, ...) so that
# whatever else the machine does falls on both sides alike. Raw results land in
# bin/bench/{old,new}.txt (each run's whole output in bin/bench/raw/), the
# comparison on stdout. Needs redis-server (make redis).
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 3 ]; then
  echo "usage: $0 OLD [NEW] [COUNT]" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
old="$(git -C "$root" rev-parse --verify "$1^{commit}")"
new="$(git -C "$root" rev-parse --verify "${2:-HEAD}^{commit}")"
count="${3:-10}"
pkgs=(enforcer/limiter enforcer/proxy)
benchstat="$root/bin/benchstat"
"$root/hack/build-tool.sh" benchstat "$benchstat"

out="$root/bin/bench"
work="$(mktemp -d)"
cleanup() {
  for side in old new; do
    git -C "$root" worktree remove --force "$work/$side" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$out"
: >"$out/old.txt"
: >"$out/new.txt"

for side in old new; do
  rev="$old"
  [ "$side" = new ] && rev="$new"
  git -C "$root" worktree add --quiet --detach "$work/$side" "$rev"
  for pkg in "${pkgs[@]}"; do
    (cd "$work/$side/$pkg" && go test -c -o bench.test .)
  done
done

# bench SIDE PKG ROUND runs one round of PKG's benchmarks for SIDE, once more
# if it fails (a Redis that a busy machine starts too slowly), and shows the
# output of a second failure.
bench() {
  local side=$1 pkg=$2 round=$3 raw
  raw="$out/raw/$side.$(basename "$pkg").$round.txt"
  for attempt in 1 2; do
    if (cd "$work/$side/$pkg" && ./bench.test -test.run '^$' -test.bench . -test.benchmem -test.count 1) >"$raw" 2>&1; then
      grep -E '^(Benchmark|goos|goarch|pkg|cpu)' "$raw" >>"$out/$side.txt"
      return 0
    fi
    echo ">> $side $pkg failed (attempt $attempt); its output ends:" >&2
    tail -n 20 "$raw" >&2
  done
  return 1
}

mkdir -p "$out/raw"
for i in $(seq "$count"); do
  echo ">> round $i of $count" >&2
  for pkg in "${pkgs[@]}"; do
    for side in old new; do
      bench "$side" "$pkg" "$i"
    done
  done
done

"$benchstat" old="$out/old.txt" new="$out/new.txt"
