#!/usr/bin/env bash
# Runs every Go fuzz target of the module briefly (FUZZTIME each, default 10s).
# Their seed corpora already run as ordinary tests in `go test ./...`; this
# explores beyond them. A failure leaves its input under testdata/fuzz/.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-10s}

go test -list '^Fuzz' ./... 2>/dev/null | awk '
  /^Fuzz/ { targets[n++] = $1; next }
  /^ok / { for (i = 0; i < n; i++) print $2, targets[i]; n = 0 }
' | while read -r pkg target; do
  echo ">> fuzz $pkg $target ($fuzztime)"
  go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
done
