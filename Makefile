# podtrace — see README.md. Every target works on a clean checkout; binaries go to bin/ (git-ignored).
SHELL := /usr/bin/env bash
GO ?= go
BIN := $(CURDIR)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: all build test vet fmt-check lint bench fuzz e2e cluster-build cluster-up cluster-down cluster-status demo image clean

all: build

build: ## bin/podtrace
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/podtrace ./cmd/podtrace

test: fmt-check vet ## unit tests (no network), go vet, gofmt
	$(GO) test -count=1 ./...
	cd deploy/image && $(GO) vet ./... && $(GO) test -count=1 ./...

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>/dev/null); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

lint: vet ## staticcheck (installed into bin/ on first use)
	@[ -x $(BIN)/staticcheck ] || GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2
	$(BIN)/staticcheck ./...

bench: ## reconstruction throughput and allocations
	$(GO) test -run '^$$' -bench . -benchmem ./phases/ ./tracer/

fuzz: ## a short run of every fuzz target
	$(GO) test -run '^$$' -fuzz FuzzParsePulledMessage -fuzztime 30s ./tracer/
	$(GO) test -run '^$$' -fuzz FuzzParseEventName -fuzztime 30s ./tracer/

cluster-build: ## control plane, node, Jaeger, Prometheus into bin/
	deploy/local/scripts/build.sh

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

image: build ## podtrace's container image, built without Docker, pushed to the local registry
	deploy/image/build.sh

clean:
	rm -rf $(BIN)/podtrace
