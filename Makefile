# yurtdns — see README.md. `make demo` and `make test` do all the set-up.
SHELL := /bin/bash
GO ?= go
BIN := bin
K8S_BIN := $(BIN)/k8s
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/yurtdns/yurtdns/internal/version.Version=$(VERSION)
# The control-plane binaries are rebuilt only when the tools module changes.
TOOLS_STAMP := $(K8S_BIN)/.built-$(shell cat hack/tools/go.mod hack/tools/go.sum hack/tools/etcd/main.go | sha256sum | cut -c1-16)
APT_GET := $(if $(filter 0,$(shell id -u)),,sudo) env DEBIAN_FRONTEND=noninteractive apt-get
FUZZTIME ?= 5s

.PHONY: all build test unit test-tools deps fuzz bench demo image clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

## test-tools: kube-apiserver and etcd for the test harness, built from the Go module proxy.
test-tools: $(TOOLS_STAMP)

$(TOOLS_STAMP): hack/tools/go.mod hack/tools/go.sum hack/tools/etcd/main.go
	@mkdir -p $(K8S_BIN)
	rm -f $(K8S_BIN)/.built-*
	cd hack/tools && $(GO) build -o ../../$(K8S_BIN)/etcd ./etcd
	cd hack/tools && $(GO) build -o ../../$(K8S_BIN)/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
	touch $@

## deps: dig and dnsperf from Debian, when missing.
deps:
	@missing=""; \
	command -v dig >/dev/null || missing="$$missing bind9-dnsutils"; \
	command -v dnsperf >/dev/null || missing="$$missing dnsperf"; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing"; \
		$(APT_GET) update -qq && $(APT_GET) install -y -qq --no-install-recommends $$missing; \
	fi

## test: vet, unit + integration + e2e tests with -race. Every fuzz test runs its seed and
## regression corpus (testdata/fuzz) here; random fuzzing is `make fuzz`, kept out of this
## target because the Go fuzz engine itself sometimes fails a time-boxed run under load
## ("context deadline exceeded") and CI must not flake.
test: deps test-tools
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 30m ./...

## fuzz: every Go fuzz test for FUZZTIME each (make fuzz FUZZTIME=5m for a long run).
## Seed corpora and crash regressions live in each package's testdata/fuzz.
fuzz:
	@set -e; for file in $$(grep -rl --include='*_test.go' '^func Fuzz' .); do \
		for f in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$file); do \
			echo "fuzz $$(dirname $$file) $$f"; \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) ./$$(dirname $$file); \
		done; \
	done

## bench: dnsperf (yurthosts vs hosts vs whoami), propagation, scale and sync benchmarks on the
## real binaries and apiserver; writes bench/results.md and bench/latency.svg (about 8 minutes).
bench: deps test-tools
	rm -rf $(BIN)/bench-data
	set -o pipefail; YURTDNS_BENCH_OUT=$(CURDIR)/$(BIN)/bench-data $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./test/bench/ | tee $(BIN)/bench.txt
	set -o pipefail; $(GO) test -run '^$$' -bench . -benchmem ./plugin/... | tee -a $(BIN)/bench.txt
	$(GO) run ./hack/benchreport -in $(BIN)/bench-data -out bench

## demo: a local control plane seeded like a small OpenYurt cluster, install, the sync,
## coredns-yurt and dig answering node names; runs until Ctrl-C, then stops everything.
demo: deps test-tools
	$(GO) build -o $(BIN)/yurtdns-demo ./test/demo
	$(BIN)/yurtdns-demo

## image: OCI image tarballs in bin/ (no container engine needed): static binary,
## CA certificates, user 65532; coredns-yurt's entrypoint is /coredns like the stock image.
image: build
	$(GO) run ./hack/image --binary $(BIN)/coredns-yurt --entrypoint /coredns --ports 53/udp,53/tcp,9153/tcp \
		--ref yurtdns/coredns-yurt:$(VERSION) --out $(BIN)/coredns-yurt.oci.tar
	$(GO) run ./hack/image --binary $(BIN)/tunnel-nodes-sync --entrypoint /tunnel-nodes-sync --ports 8080/tcp,8081/tcp \
		--ref yurtdns/tunnel-nodes-sync:$(VERSION) --out $(BIN)/tunnel-nodes-sync.oci.tar

clean:
	rm -rf $(BIN)
