#!/usr/bin/env bash
# Builds a pinned development tool from its module under hack/tools/NAME.
#
#   hack/build-tool.sh NAME OUTPUT     NAME: benchstat, controller-gen, golangci-lint, helm or kwok
#
# Each tool has a module of its own (hack/tools/NAME/go.mod, with a `tool`
# line and a committed go.sum) so that it builds with the dependency versions
# its release was tested with and none of them leak into the project's go.mod.
# To upgrade: cd hack/tools/NAME && go get MODULE@VERSION && go mod tidy.
#
# The version is stamped into the binary as the tool's own release build does
# (otherwise a tool built as a dependency reports "(devel)", and controller-gen
# writes that into every CRD it generates). A stamp file next to OUTPUT skips
# the build while the module is unchanged.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 benchstat|controller-gen|golangci-lint|helm|kwok OUTPUT" >&2
  exit 2
fi
name="$1"
out="$2"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
moddir="$root/hack/tools/$name"

# Static binaries, no VCS stamp (the code comes from module zips, not from this
# checkout), and no go.work from around the repo.
export CGO_ENABLED=0 GOWORK=off

# module_version MODULE prints the version of MODULE required in the tool's
# go.mod; reading the file keeps the check fast and offline.
module_version() {
  awk -v mod="$1" '$1 !~ /^\/\// && $0 !~ /=>/ { for (i = 1; i < NF; i++) if ($i == mod) { print $(i + 1); exit } }' "$moddir/go.mod"
}

case "$name" in
controller-gen)
  pkg=sigs.k8s.io/controller-tools/cmd/controller-gen
  version="$(module_version sigs.k8s.io/controller-tools)"
  ldflags="-X sigs.k8s.io/controller-tools/pkg/version.version=$version"
  ;;
golangci-lint)
  pkg=github.com/golangci/golangci-lint/v2/cmd/golangci-lint
  version="$(module_version github.com/golangci/golangci-lint/v2)"
  # main ignores version unless date is set too; there is no commit to name.
  ldflags="-X main.version=${version#v} -X main.date=unknown"
  ;;
benchstat)
  pkg=golang.org/x/perf/cmd/benchstat
  version="$(module_version golang.org/x/perf)"
  ldflags=""
  ;;
helm)
  pkg=helm.sh/helm/v3/cmd/helm
  version="$(module_version helm.sh/helm/v3)"
  # As helm's Makefile does: the default Kubernetes version that `helm
  # template` and `helm lint` assume follows the client-go helm was built with.
  k8s="$(module_version k8s.io/client-go)" # v0.MINOR.PATCH
  k8s_minor="${k8s#v0.}"
  k8s_minor="${k8s_minor%%.*}"
  ldflags="-X helm.sh/helm/v3/internal/version.version=$version -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  for p in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    ldflags+=" -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=$k8s_minor"
  done
  ;;
kwok)
  pkg=sigs.k8s.io/kwok/cmd/kwok
  version="$(module_version sigs.k8s.io/kwok)"
  # Its release stamps the version in; the default is the module's own.
  ldflags="-X sigs.k8s.io/kwok/pkg/consts.Version=${version#v}"
  ;;
*)
  echo "error: unknown tool $name (want benchstat, controller-gen, golangci-lint, helm or kwok)" >&2
  exit 2
  ;;
esac

if [ -z "$version" ]; then
  echo "error: cannot read the pinned version of $name from $moddir/go.mod" >&2
  exit 1
fi

mkdir -p "$(dirname "$out")"
out="$(cd "$(dirname "$out")" && pwd)/$(basename "$out")"
stamp="$(dirname "$out")/.$(basename "$out").stamp"
want="$name $version $(cat "$moddir/go.mod" "$moddir/go.sum" | sha256sum | cut -d' ' -f1) $ldflags"
if [ -x "$out" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  # Up to date; refresh the time so make stops asking until go.mod changes.
  touch "$out"
  exit 0
fi

echo ">> building $name $version into $out"
start=$SECONDS
rm -f "$stamp"
go build -C "$moddir" -trimpath -buildvcs=false -ldflags "-s -w $ldflags" -o "$out.tmp" "$pkg"
mv -f "$out.tmp" "$out"
echo "$want" >"$stamp"
echo ">> built $name $version in $((SECONDS - start))s"
