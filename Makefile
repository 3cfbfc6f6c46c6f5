# Sluice — build, test and generate.
# Every target installs what it needs (Redis and Prometheus via apt-get, envtest binaries and
# pinned tools built from the Go module proxy into ./bin), so a fresh machine
# only needs Go and make.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

BIN            := $(CURDIR)/bin
ENVTEST_ASSETS := $(BIN)/k8s
CONTROLLER_GEN := $(BIN)/controller-gen
GOLANGCI_LINT  := $(BIN)/golangci-lint
GO_TEST_FLAGS  ?= -count=1 -timeout 20m
FUZZTIME       ?= 10s

export KUBEBUILDER_ASSETS := $(ENVTEST_ASSETS)

.PHONY: all
all: build

##@ Build

.PHONY: build
build: ## Build bin/sluice-manager, bin/sluice-enforcer (with bin/sluice-policy-compile, which its --policy-file runs), bin/sluice-ratelimit, bin/sluice-load and bin/kubectl-sluice.
	go build -o $(BIN)/sluice-manager ./cmd/manager
	go build -o $(BIN)/sluice-enforcer ./cmd/enforcer
	go build -o $(BIN)/sluice-policy-compile ./cmd/policy-compile
	go build -o $(BIN)/sluice-ratelimit ./cmd/ratelimit
	go build -o $(BIN)/sluice-load ./cmd/sluice-load
	go build -o $(BIN)/kubectl-sluice ./cmd/kubectl-sluice

# Where the release archives of kubectl-sluice are published; make krew
# writes their URLs into plugins/sluice.yaml.
KREW_URL_BASE ?= https://github.com/sluice-dev/sluice/releases/download/$(VERSION)

.PHONY: krew
krew: ## Build kubectl-sluice's release archives into dist/krew and fill plugins/sluice.yaml with their URLs (KREW_URL_BASE) and sha256.
	hack/krew.sh $(VERSION) $(KREW_URL_BASE) $(CURDIR)/dist/krew plugins/sluice.yaml

##@ Test

.PHONY: test
test: lint deps ## Lint (import rules included), run every test suite against real Redis and a real kube-apiserver, fuzz briefly, then the real-node suite (as root).
	go test $(GO_TEST_FLAGS) ./...
	go test $(GO_TEST_FLAGS) -tags overload -run '^TestOverload' ./test/enforcer/
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh
	@if [ "$$(id -u)" = 0 ]; then $(MAKE) test-node; else \
		echo "test-node skipped: the real-node suite runs a kubelet and needs root (sudo make test-node)"; fi

.PHONY: test-scale
test-scale: envtest redis $(BIN)/kwok ## Measure the manager at 100, 1,000 and 10,000 pods (kwok, simulated enforcers, three managers); 25 minutes or more, much longer on a loaded machine; not part of make test. SCALE_PODS and SCALE_QUIET narrow it.
	KWOK=$(BIN)/kwok go test -tags scale ./test/scale/ -run '^TestScale$$' -count=1 -timeout 80m -v

.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZTIME (default 10s).
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh

.PHONY: deps
deps: redis prometheus envtest erl ## Install Redis and Prometheus, build the envtest binaries and the reference rate limit service (cached).
	go mod download

.PHONY: redis
redis: ## Ensure redis-server, redis-cli, redis-benchmark and libfaketime (Debian's faketime) are installed.
	hack/ensure-redis.sh

.PHONY: prometheus
prometheus: ## Ensure prometheus and promtool are installed (the monitoring tests run their own server).
	hack/ensure-prometheus.sh

.PHONY: envtest
envtest: ## Build etcd and kube-apiserver for envtest into ./bin/k8s (cached).
	hack/envtest.sh $(ENVTEST_ASSETS)

.PHONY: erl
erl: ## Build envoyproxy/ratelimit, the peer of the rate limit service's differential tests, into ./bin/erl (cached).
	hack/erl.sh $(BIN)/erl

.PHONY: node-bin
node-bin: envtest ## Build kubelet, kube-proxy, kube-controller-manager and kube-scheduler into ./bin/node (cached).
	hack/envtest.sh node

.PHONY: test-node
test-node: envtest node-bin node-images ## The real-node suite: a kubelet with containerd and runc on this machine (root; restores the host after).
	hack/ensure-node.sh
	go test -tags node ./test/node/ -count=1 -timeout 20m -v

.PHONY: node-undo
node-undo: ## Undo what a killed real-node run left on the host (processes, mounts, iptables, sysctls); refuses while a run is in progress.
	go run ./hack/node-undo

.PHONY: bench
bench: redis ## Run the Go benchmarks against a local Redis.
	go test -run '^$$' -bench . -benchmem ./enforcer/...

.PHONY: bench-compare
bench-compare: redis ## Compare the limiter and proxy benchmarks of BASE (a git revision) and HEAD with benchstat, COUNT runs each (default 10).
	hack/bench-compare.sh $(BASE) HEAD $(or $(COUNT),10)

##@ Code quality

.PHONY: lint
lint: $(GOLANGCI_LINT) ## gofmt, go vet and golangci-lint.
	@bad=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$bad" ]; then echo "gofmt needed:"; echo "$$bad"; exit 1; fi
	go vet ./...
	go vet -tags node ./test/node/ ./internal/testing/node/
	go vet -tags overload ./test/enforcer/
	go vet -tags scale ./test/scale/
	$(GOLANGCI_LINT) run ./...
	$(GOLANGCI_LINT) run --build-tags overload ./test/enforcer/

.PHONY: fmt
fmt: ## Format the code.
	gofmt -w $$(git ls-files '*.go')

##@ Generate

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code for the API types.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRD, RBAC and webhook manifests.
	$(CONTROLLER_GEN) crd rbac:roleName=sluice-manager webhook paths=./api/... paths=./controllers/... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac \
		output:webhook:artifacts:config=config/webhook
	hack/sync-chart.sh

##@ Tools

# One module per tool (hack/tools/NAME/go.mod); a binary is rebuilt when its
# module changes.
HELM := $(BIN)/helm

$(GOLANGCI_LINT): hack/tools/golangci-lint/go.mod
	hack/build-tool.sh golangci-lint $@

$(CONTROLLER_GEN): hack/tools/controller-gen/go.mod
	hack/build-tool.sh controller-gen $@

$(HELM): hack/tools/helm/go.mod
	hack/build-tool.sh helm $@

$(BIN)/benchstat: hack/tools/benchstat/go.mod
	hack/build-tool.sh benchstat $@

$(BIN)/kwok: hack/tools/kwok/go.mod
	hack/build-tool.sh kwok $@

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-12s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Install: images, Helm chart, kustomize

# The release the images and the chart carry: the chart's appVersion, which is
# also the images' default tag in the chart.
VERSION        ?= $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$$/\1/p' charts/sluice/Chart.yaml)
# docker or podman; empty: docker when its daemon answers, else podman
# (installed with apt-get when missing and running as root).
CONTAINER_TOOL ?=
# prebuilt: the binaries are built on this machine and the engine pulls
# nothing; build: they compile in the Dockerfiles' Go image, as CI does.
BINARIES       ?= prebuilt
# Put in front of the image names: your registry and path, with a trailing slash.
IMAGE_PREFIX   ?=
MANAGER_IMAGE  ?= $(IMAGE_PREFIX)sluice-manager:$(VERSION)
ENFORCER_IMAGE ?= $(IMAGE_PREFIX)sluice-enforcer:$(VERSION)
RATELIMIT_IMAGE ?= $(IMAGE_PREFIX)sluice-ratelimit:$(VERSION)
# The OCI archives of the real-node tier, one per image, named
# localhost/sluice-enforcer:$(VERSION) and so on (the chart's images.registry=localhost).
NODE_IMAGES       := $(BIN)/images
NODE_IMAGE_PREFIX ?= localhost/
IMAGE_ENV      = VERSION=$(VERSION) MANAGER_IMAGE=$(MANAGER_IMAGE) ENFORCER_IMAGE=$(ENFORCER_IMAGE) RATELIMIT_IMAGE=$(RATELIMIT_IMAGE) CONTAINER_TOOL=$(CONTAINER_TOOL) BINARIES=$(BINARIES)

.PHONY: images
images: ## Build the manager, enforcer and rate limit service images with docker or podman (CONTAINER_TOOL; BINARIES=build compiles in a Go image).
	$(IMAGE_ENV) hack/images.sh build

.PHONY: verify-images
verify-images: images ## Run the built images: each prints VERSION and runs as uid 65532.
	$(IMAGE_ENV) hack/images.sh verify

.PHONY: node-images
node-images: redis ## Write bin/images/*.tar, OCI archives of every image the real node runs (no engine, no registry; cached).
	go run ./hack/images archives --out $(NODE_IMAGES) --version $(VERSION) --prefix $(NODE_IMAGE_PREFIX)

.PHONY: verify-node-images
verify-node-images: node-images ## Import bin/images/*.tar into a containerd of its own and run the enforcer and Redis from it (root).
	VERSION=$(VERSION) hack/images.sh verify-node

.PHONY: chart-sync
chart-sync: ## Copy the generated CRD, RBAC and webhook into the chart and render config/default from it.
	hack/sync-chart.sh

.PHONY: verify-chart
verify-chart: ## Fail when the chart's copies or config/default are older than the generated manifests.
	hack/sync-chart.sh --check

.PHONY: helm-lint
helm-lint: $(HELM) ## helm lint --strict the chart with its default values and each ci/ values file.
	$(HELM) lint --strict charts/sluice
	@for f in charts/sluice/ci/*.yaml; do echo "$(HELM) lint --strict charts/sluice -f $$f"; $(HELM) lint --strict charts/sluice -f $$f || exit 1; done

##@ Demo

.PHONY: demo
demo: redis envtest ## Run Sluice on this machine and show it limit traffic; KEEP=1 leaves it running until Ctrl-C.
	@echo ">> building the demo"
	go build -o $(BIN)/sluice-demo ./hack/demo
	$(BIN)/sluice-demo $(if $(KEEP),--keep)

.PHONY: demo-node
demo-node: envtest node-bin node-images $(HELM) ## The demo on a real node: kubelet, containerd, kube-proxy, the chart installed with helm (root; changes iptables, cgroups, mounts and sysctls while it runs and restores them); KEEP=1 leaves it running until Ctrl-C.
	hack/ensure-node.sh
	go build -o $(BIN)/sluice-demo-node ./hack/demo-node
	$(BIN)/sluice-demo-node $(if $(KEEP),--keep)
