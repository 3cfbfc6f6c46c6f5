#!/usr/bin/env bash
# Compares the limiter and proxy benchmarks of two revisions with benchstat.
#
#   hack/bench-compare.sh OLD [NEW] [COUNT]     NEW defaults to HEAD, COUNT to 10
#
# Each revision is checked out into a temporary worktree and its test binaries
# are built once; the runs then alternate (old, new, old, new, ...) so that
# whatever else the machine does falls on both sides alike. Raw results land in
# bin/bench/{old,new}.txt, the comparison on stdout. Needs redis-server (make redis).
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

for i in $(seq "$count"); do
  echo ">> round $i of $count" >&2
  for pkg in "${pkgs[@]}"; do
    for side in old new; do
      (cd "$work/$side/$pkg" && ./bench.test -test.run '^$' -test.bench . -test.benchmem -test.count 1) \
        | grep -E '^(Benchmark|goos|goarch|pkg|cpu)' >>"$out/$side.txt"
    done
  done
done

"$benchstat" old="$out/old.txt" new="$out/new.txt"
