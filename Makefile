# readyspan — see README.md. Every target works on a clean checkout; binaries go to bin/ (git-ignored).
SHELL := /usr/bin/env bash
GO ?= go
# The Go toolchain is go.mod's `toolchain` line (Go 1.27.3: the standard library without the
# vulnerabilities govulncheck finds in 1.26.8). Exported, so the go command fetches it through the
# module proxy once even where `go env GOTOOLCHAIN` is `local`; every component in bin/ is built with it.
export GOTOOLCHAIN := $(shell awk '/^toolchain /{print $$2}' go.mod)
BIN := $(CURDIR)/bin
# The release version lives in VERSION: `readyspan version`, `make dist`, the krew manifest and the
# image tag in deploy/kubernetes all report it. COMMIT says which tree a binary was built from.
VERSION ?= $(shell cat VERSION)
COMMIT ?= $(shell git describe --always --dirty 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: all build test vet fmt-check lint vulncheck bench fuzz e2e e2e-faults otlp-attack scale ceiling cluster-build argo-rollouts network-policies cluster-up cluster-down cluster-status demo image clean

all: build

build: ## bin/readyspan
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/readyspan ./cmd/readyspan

test: fmt-check vet ## unit tests (no network), go vet, gofmt
	$(GO) test -count=1 ./...
	cd deploy/image && $(GO) vet ./... && $(GO) test -count=1 ./...
	cd deploy/local/tools/webhook && $(GO) vet ./... && $(GO) test -count=1 ./...
	@[ -x $(BIN)/promtool ] || { echo; echo "make test: bin/promtool is not built, so promtool's checks of the alert rules and the"; \
	  echo "dashboard's queries were SKIPPED. make cluster-build builds it; CI builds it first and fails without it."; }
	@[ -x $(BIN)/helm ] || { echo; echo "make test: bin/helm is not built, so the Helm chart's checks (deploy/helm: helm lint, the schema,"; \
	  echo "the diff against the kustomize base) were SKIPPED. make cluster-build builds it; CI builds it first and fails without it."; }

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>/dev/null); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

lint: vet vulncheck ## staticcheck and govulncheck (installed into bin/ on first use)
	@[ -x $(BIN)/staticcheck ] || GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2
	$(BIN)/staticcheck ./...

# govulncheck's default database, vuln.go.dev, is out of reach where only the Go module proxy is:
# deploy/local/scripts/vulndb.sh builds the same database into bin/vulndb from the pinned
# golang.org/x/vulndb module. GOVULNDB=https://vuln.go.dev (or another copy) overrides it.
GOVULNDB ?= file://$(BIN)/vulndb
vulncheck: ## govulncheck against the Go vulnerability database (bin/vulndb)
	@[ -x $(BIN)/govulncheck ] || GOBIN=$(BIN) $(GO) install golang.org/x/vuln/cmd/govulncheck@v1.9.0
	@[ '$(GOVULNDB)' != 'file://$(BIN)/vulndb' ] || deploy/local/scripts/vulndb.sh
	$(BIN)/govulncheck -db '$(GOVULNDB)' ./...
	cd deploy/image && $(BIN)/govulncheck -db '$(GOVULNDB)' ./...

bench: ## reconstruction, OTLP export and OTLP input throughput, and allocations
	$(GO) test -run '^$$' -bench . -benchmem ./phases/ ./tracer/ ./exporters/otlp/ ./otlpin/

# Every fuzz target, a short run each (FUZZTIME); seeds are committed in each package's
# testdata/fuzz/<target>/ and run by plain `go test` too.
FUZZTIME ?= 20s
TRACER_FUZZ := FuzzParseAuditLine FuzzStepOf FuzzEventMessages
EVENTS_FUZZ := FuzzParsePulledMessage FuzzParseEventName FuzzParseHex FuzzContainerFromFieldPath FuzzParsePreemptedMessage FuzzParseDisruption
WATCH_FUZZ := FuzzReadWatch FuzzReadList FuzzStripFrame FuzzStripPod FuzzEnvelopes
PROXYRULES_FUZZ := FuzzIPTComment FuzzNFTServiceChain
fuzz: ## a short run of every fuzz target
	@set -e; for f in $(TRACER_FUZZ); do $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) ./tracer/; done
	@set -e; for f in $(WATCH_FUZZ); do $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) ./watch/; done
	@set -e; for f in $(EVENTS_FUZZ); do $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) ./events/; done
	@set -e; for f in $(PROXYRULES_FUZZ); do $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) ./dataplane/proxyrules/; done
	$(GO) test -run '^$$' -fuzz '^FuzzAttributes$$' -fuzztime $(FUZZTIME) ./exporters/otlp/
	$(GO) test -run '^$$' -fuzz '^FuzzJoinViews$$' -fuzztime $(FUZZTIME) ./cmd/readyspan/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./tracecontext/

# KUBELET_VERSION=1.34 (1.35, 1.36): the local node runs that kubelet (make e2e, cluster-up,
# demo), built on demand into bin/kubelet-1.34; CONTAINERD_VERSION=1.7 likewise for the runtime
# (docs/kubelet-versions.md). Unset: the control plane's own, 1.37, and containerd 2.
KUBELET_VERSION ?=
CONTAINERD_VERSION ?=
export KUBELET_VERSION CONTAINERD_VERSION
cluster-build: ## control plane, node, Jaeger, Prometheus into bin/
	deploy/local/scripts/build.sh
	@if [ -n '$(KUBELET_VERSION)' ] && [ '$(KUBELET_VERSION)' != 1.37 ]; then deploy/local/scripts/build.sh 'kubelet-$(KUBELET_VERSION)'; fi
	@if [ '$(CONTAINERD_VERSION)' = 1.7 ]; then deploy/local/scripts/build.sh containerd-1.7 containerd-shim-runc-v2-1.7; fi

# Argo Rollouts' controller (deploy/local/tools/argo-rollouts), for capture-rollout.sh; on demand only:
# its cold build takes ~12 min, too long for every cluster-build.
argo-rollouts: ## bin/rollouts-controller
	SKIP_PACKAGES=1 deploy/local/scripts/build.sh rollouts-controller

# kube-network-policies (deploy/local/tools/network-policies), a NetworkPolicy implementation for
# deploy/local/scripts/network-policies.sh; on demand only (docs/design/network-policies.md).
network-policies: ## bin/kube-network-policies
	SKIP_PACKAGES=1 deploy/local/scripts/build.sh kube-network-policies

cluster-up: cluster-build build
	deploy/local/scripts/up.sh

cluster-down:
	deploy/local/scripts/down.sh

cluster-status:
	deploy/local/scripts/status.sh

demo: cluster-build build ## the README's first command
	deploy/local/scripts/demo.sh

e2e: cluster-build build ## end to end against the local cluster
	deploy/local/scripts/e2e.sh

# `make scale`: one load level of the KWOK test bed (docs/scale.md); SCALE_NODES, SCALE_PODS,
# SCALE_RATE (and SCALE_ROLLS, SCALE_REPLICAS, SCALE_DEADLINE, SCALE_SHARDS) set it.
scale: cluster-build build ## readyspan against the bare informers under load, on fake nodes
	SCALE_NODES='$(SCALE_NODES)' SCALE_PODS='$(SCALE_PODS)' SCALE_RATE='$(SCALE_RATE)' deploy/local/scripts/scale.sh

# `make ceiling`: readyspan's own ceiling, apart from the control plane (docs/scale.md): a
# recording of the scale test bed's load served by a test-only API server (test/scale/fakeapi) at
# each of CEILING_RATES Pod startups/s, in each of CEILING_ENCODINGS, to readyspan run and then to
# the bare baseline. No cluster. CEILING_ARGS: more `ceiling run` flags (--duration, --unit…).
CEILING_RATES ?= 100,300,1000
CEILING_ENCODINGS ?= json,protobuf
ceiling: build ## readyspan's ceiling against a replayed stream, next to the baseline's
	$(GO) build -o $(BIN)/scale-baseline ./test/scale/baseline
	$(GO) build -o $(BIN)/ceiling ./test/scale/ceiling
	$(BIN)/ceiling run --readyspan $(BIN)/readyspan --baseline $(BIN)/scale-baseline \
	  --rates '$(CEILING_RATES)' --encodings '$(CEILING_ENCODINGS)' $(CEILING_ARGS)

otlp-attack: build ## the OTLP input's peak memory under every attack of test/otlpattack, the chart's settings
	$(GO) build -o $(BIN)/otlpattack ./test/scale/otlpattack
	deploy/local/scripts/otlp-attack.sh

e2e-faults: cluster-build ## the fault suite on the local cluster (docs/faults.md)
	deploy/local/scripts/faults.sh

image: build ## readyspan's container image, built without Docker, pushed to the local registry
	deploy/image/build.sh

# `make install` puts readyspan on the PATH as itself and, linked, as kubectl-readyspan: the
# kubectl plugin `kubectl readyspan`. PREFIX and DESTDIR as usual (DESTDIR for packagers).
PREFIX ?= /usr/local
.PHONY: install dist
install: build
	install -d '$(DESTDIR)$(PREFIX)/bin'
	install -m 0755 $(BIN)/readyspan '$(DESTDIR)$(PREFIX)/bin/readyspan'
	ln -sfn readyspan '$(DESTDIR)$(PREFIX)/bin/kubectl-readyspan'

# `make dist`: reproducible release archives of VERSION in bin/dist with their SHA256SUMS
# (deploy/dist/archive.sh), and the krew manifest for exactly those archives,
# deploy/krew/readyspan.yaml (generated, git-ignored: its sha256s are true only for the tree it was
# built from), checked by krew's own validator and krew's install of each archive; and the Helm
# chart, readyspan-$(VERSION without v).tgz with chart-SHA256SUMS (deploy/dist/chart.sh, bin/helm).
DIST_PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
dist: $(BIN)/validate-krew-manifest $(BIN)/krew $(BIN)/helm
	GO='$(GO)' VERSION='$(VERSION)' LDFLAGS='$(LDFLAGS)' deploy/dist/archive.sh $(BIN)/dist $(DIST_PLATFORMS)
	$(GO) run ./deploy/krew/render -version '$(VERSION)' -sums $(BIN)/dist/SHA256SUMS -o deploy/krew/readyspan.yaml
	GO='$(GO)' deploy/krew/validate/validate.sh deploy/krew/readyspan.yaml $(BIN)/dist $(BIN)
	VERSION='$(VERSION)' HELM='$(BIN)/helm' deploy/dist/chart.sh $(BIN)/dist
	@cat $(BIN)/dist/SHA256SUMS $(BIN)/dist/chart-SHA256SUMS

# helm, pinned by deploy/local/tools/helm/go.mod (make cluster-build builds it too).
$(BIN)/helm:
	SKIP_PACKAGES=1 deploy/local/scripts/build.sh helm

# krew's tools, pinned by deploy/krew/validate/go.mod; built once (delete them to rebuild).
$(BIN)/validate-krew-manifest $(BIN)/krew:
	cd deploy/krew/validate && $(GO) build -o $@ sigs.k8s.io/krew/cmd/$(notdir $@)

clean:
	rm -rf $(BIN)/readyspan
