# yurtdns — see README.md. `make demo` and `make test` do all the set-up.
SHELL := /bin/bash
GO ?= go
BIN := bin
K8S_BIN := $(BIN)/k8s
# The release this tree is (docs/release.md), read once: the binaries, the image tags and
# the release's manifests name the same version. `make VERSION=...` overrides it.
VERSION := $(strip $(file < VERSION))
# The commit `version` prints.
COMMIT := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
# -s -w as CoreDNS's own release builds: no symbol table or DWARF (a third of coredns-yurt's
# size, and of the link time of each of the image's platforms).
LDFLAGS := -s -w -X github.com/yurtdns/yurtdns/internal/version.Version=$(VERSION) -X github.com/yurtdns/yurtdns/internal/version.Commit=$(COMMIT)
# The Kubernetes binaries are rebuilt only when the tools module changes. They are
# stamped with their real version (kubeadm, the kubelet and install's version checks
# read it; a plain go build reports v0.0.0-master).
K8S_VERSION := v1.37.1
COREDNS_VERSION := v1.15.0
TOOLS_STAMP := $(K8S_BIN)/.built-$(shell cat hack/tools/go.mod hack/tools/go.sum hack/tools/etcd/main.go hack/tools/pause/main.go | sha256sum | cut -c1-16)
# k8s_ldflags stamps a Kubernetes build with version $(1), minor $(2).
k8s_ldflags = -s -w $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(p).gitVersion=$(1) -X $(p).gitMajor=1 -X $(p).gitMinor=$(2) \
	-X $(p).gitCommit=0000000000000000000000000000000000000000 -X $(p).gitTreeState=clean \
	-X $(p).buildDate=2026-01-01T00:00:00Z)
K8S_LDFLAGS := $(call k8s_ldflags,$(K8S_VERSION),37)
K8S_CMDS := kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubeadm kubectl
# The version the real cluster starts at before TestKubeadmUpgrade moves it to K8S_VERSION:
# every binary a node runs but kubectl, from its own module (hack/tools/k8s-v1.36), in
# bin/k8s/$(K8S_PREV_VERSION)/.
K8S_PREV_VERSION := v1.36.3
K8S_PREV_BIN := $(K8S_BIN)/$(K8S_PREV_VERSION)
K8S_PREV_STAMP := $(K8S_PREV_BIN)/.built-$(shell cat hack/tools/k8s-v1.36/go.mod hack/tools/k8s-v1.36/go.sum | sha256sum | cut -c1-16)
K8S_PREV_CMDS := kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubeadm
APT_GET := $(if $(filter 0,$(shell id -u)),,sudo) env DEBIAN_FRONTEND=noninteractive apt-get
FUZZTIME ?= 1m
# Random fuzzing per target inside make test.
TEST_FUZZTIME ?= 10s

.PHONY: all build cross prereqs test unit test-tools deps fuzz soak bench demo image clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

## cross: static builds of the binaries for every platform make image writes
## (internal/image.Platforms: linux/amd64, linux/arm64, linux/arm/v7) in bin/linux_<arch>/;
## this machine's own platform is build's binaries, hard-linked (the same command, so the
## same bytes), and the Go build cache keeps a second run to the link step.
CROSS_ARCHS := amd64 arm64 arm
COMMANDS := $(notdir $(wildcard cmd/*))
cross: build
	host=$$($(GO) env GOOS)/$$($(GO) env GOARCH); \
	for arch in $(CROSS_ARCHS); do \
		mkdir -p $(BIN)/linux_$$arch; \
		if [ "$$host" = linux/$$arch ] && [ $$arch != arm ]; then \
			(cd $(BIN) && ln -f $(COMMANDS) linux_$$arch/) || exit 1; \
		else \
			CGO_ENABLED=0 GOOS=linux GOARCH=$$arch GOARM=7 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/linux_$$arch/ ./cmd/... || exit 1; \
		fi; \
	done
# image_binaries are hack/image's --binary flags for one binary, a platform each.
image_binaries = --binary linux/amd64=$(BIN)/linux_amd64/$(1) --binary linux/arm64=$(BIN)/linux_arm64/$(1) --binary linux/arm/v7=$(BIN)/linux_arm/$(1)

## prereqs: deps, then test-tools and image side by side: on a fresh machine both spend
## minutes waiting on module downloads and single-threaded links, which the other fills.
prereqs: deps
	$(MAKE) -j2 test-tools image VERSION=$(VERSION)

## test-tools: the Kubernetes v1.37.1 binaries, etcd, a pause binary and stock CoreDNS
## v1.15.0, built from the Go module proxy into bin/k8s (the envtest harness uses
## kube-apiserver and etcd; the kubeadm cluster in test/cluster uses all of them).
test-tools: $(TOOLS_STAMP)

$(TOOLS_STAMP): hack/tools/go.mod hack/tools/go.sum hack/tools/etcd/main.go hack/tools/pause/main.go
	@mkdir -p $(K8S_BIN)
	rm -f $(K8S_BIN)/.built-*
	cd hack/tools && CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(K8S_LDFLAGS)' -o ../../$(K8S_BIN)/ \
		$(addprefix k8s.io/kubernetes/cmd/,$(K8S_CMDS)) ./etcd ./pause
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w -X github.com/coredns/coredns/coremain.GitCommit=$(COREDNS_VERSION)' \
		-o $(K8S_BIN)/coredns github.com/coredns/coredns
	touch $@

## k8s-prev: the Kubernetes v1.36.3 binaries (part of test-tools), cached like the others.
.PHONY: k8s-prev
k8s-prev test-tools: $(K8S_PREV_STAMP)
$(K8S_PREV_STAMP): hack/tools/k8s-v1.36/go.mod hack/tools/k8s-v1.36/go.sum
	@mkdir -p $(K8S_PREV_BIN)
	rm -f $(K8S_PREV_BIN)/.built-*
	cd hack/tools/k8s-v1.36 && CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(call k8s_ldflags,$(K8S_PREV_VERSION),36)' \
		-o ../../../$(K8S_PREV_BIN)/ $(addprefix k8s.io/kubernetes/cmd/,$(K8S_PREV_CMDS))
	touch $@

## openyurt: OpenYurt v1.7.0's yurthub, yurt-manager, yurt-tunnel-server and yurt-tunnel-agent,
## from their own module (hack/tools/openyurt: openyurt pins k8s.io/kubernetes v1.34.0), and the
## yurt-manager chart's CRDs and RBAC from the same module, part of test-tools: the edge-autonomy
## tests run yurthub, and test/cluster makes the kubeadm cluster an OpenYurt cluster with all four.
OPENYURT_STAMP := $(K8S_BIN)/.openyurt-$(shell cat hack/tools/openyurt/go.mod hack/tools/openyurt/go.sum | sha256sum | cut -c1-16)
OPENYURT_LDFLAGS := -s -w $(foreach v,gitVersion=v1.7.0 gitCommit=35ef4cd692e387d0d56c9084e3da161bad2a3092 buildDate=2026-01-01T00:00:00Z,\
	-X github.com/openyurtio/openyurt/pkg/projectinfo.$(v))
OPENYURT_CMDS := yurthub yurt-manager yurt-tunnel-server yurt-tunnel-agent
.PHONY: openyurt
openyurt test-tools: $(OPENYURT_STAMP)
$(OPENYURT_STAMP): hack/tools/openyurt/go.mod hack/tools/openyurt/go.sum
	@mkdir -p $(K8S_BIN)
	rm -f $(K8S_BIN)/.openyurt-* $(K8S_BIN)/.yurthub-*
	cd hack/tools/openyurt && CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(OPENYURT_LDFLAGS)' \
		-o ../../../$(K8S_BIN)/ $(addprefix github.com/openyurtio/openyurt/cmd/,$(OPENYURT_CMDS))
	rm -rf $(K8S_BIN)/openyurt-chart && mkdir -p $(K8S_BIN)/openyurt-chart && \
		chart=$$(cd hack/tools/openyurt && $(GO) list -m -f '{{.Dir}}' github.com/openyurtio/openyurt)/charts/yurt-manager && \
		mkdir $(K8S_BIN)/openyurt-chart/crds && cp $$chart/crds/*.yaml $(K8S_BIN)/openyurt-chart/crds/ && \
		cp $$chart/templates/yurt-manager-auto-generated.yaml $$chart/../yurthub/templates/yurthub-cfg.yaml $(K8S_BIN)/openyurt-chart/ && \
		chmod -R u+w $(K8S_BIN)/openyurt-chart
	touch $@

## monitoring: Prometheus v3.16.0, prometheus-operator v0.85.0 (operator and
## prometheus-config-reloader, and its CRDs) and node_exporter v1.12.1, cached like test-tools:
## the monitoring test on the kubeadm cluster runs them as test/cluster's images, and
## test/realcluster builds them beside the cluster's start (nice 19), not prereqs; the CRDs come
## with test-tools (monitoring-crds). Each comes from
## its own module under hack/tools/monitoring, so each builds with its release's dependency
## versions, and is stamped as promu stamps the release (`--version`). Prometheus builds with
## Kubernetes service discovery alone and without the web UI (an npm build): its HTTP API and
## /metrics are whole. The CRDs are example/prometheus-operator-crd, the release's bundle.yaml
## ones (v1 and v1alpha1; -full adds AlertmanagerConfig v1beta1, which needs the conversion
## webhook); a few are larger than client-side apply's annotation: apply them --server-side.
PROMETHEUS_VERSION := 3.16.0
PROMETHEUS_OPERATOR_VERSION := 0.85.0
NODE_EXPORTER_VERSION := 1.12.1
MONITORING_MODULES := $(foreach m,prometheus prometheus-operator node_exporter,hack/tools/monitoring/$(m)/go.mod hack/tools/monitoring/$(m)/go.sum)
MONITORING_STAMP := $(K8S_BIN)/.monitoring-$(shell cat $(MONITORING_MODULES) | sha256sum | cut -c1-16)
# promu_ldflags are a release's: version $(1), the tag's commit $(2) (Prometheus v3.16.0's is
# not known here: it prints revision unknown).
promu_ldflags = -s -w $(foreach v,Version=$(1) Revision=$(2) Branch=HEAD BuildUser=yurtdns@make BuildDate=20260101-00:00:00,\
	-X github.com/prometheus/common/version.$(v))
PROMETHEUS_OPERATOR_LDFLAGS := $(call promu_ldflags,$(PROMETHEUS_OPERATOR_VERSION),2ed4172b180213b6082025237bb0c155b74b6080)
.PHONY: monitoring
monitoring: $(MONITORING_STAMP)
$(MONITORING_STAMP): $(MONITORING_MODULES)
	@mkdir -p $(K8S_BIN)
	rm -f $(K8S_BIN)/.monitoring-*
	cd hack/tools/monitoring/prometheus && CGO_ENABLED=0 $(GO) build -trimpath -tags remove_all_sd,enable_kubernetes_sd \
		-ldflags '$(call promu_ldflags,$(PROMETHEUS_VERSION),)' \
		-o ../../../../$(K8S_BIN)/prometheus github.com/prometheus/prometheus/cmd/prometheus
	cd hack/tools/monitoring/prometheus-operator && \
		CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(PROMETHEUS_OPERATOR_LDFLAGS)' \
			-o ../../../../$(K8S_BIN)/prometheus-operator github.com/prometheus-operator/prometheus-operator/cmd/operator && \
		CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(PROMETHEUS_OPERATOR_LDFLAGS)' \
			-o ../../../../$(K8S_BIN)/prometheus-config-reloader github.com/prometheus-operator/prometheus-operator/cmd/prometheus-config-reloader
	cd hack/tools/monitoring/node_exporter && CGO_ENABLED=0 $(GO) build -trimpath \
		-ldflags '$(call promu_ldflags,$(NODE_EXPORTER_VERSION),6044da783597cc3b57aef7580ddcdcff58a4ee99)' \
		-o ../../../../$(K8S_BIN)/node_exporter github.com/prometheus/node_exporter
	for b in prometheus:$(PROMETHEUS_VERSION) prometheus-operator:$(PROMETHEUS_OPERATOR_VERSION) \
		prometheus-config-reloader:$(PROMETHEUS_OPERATOR_VERSION) node_exporter:$(NODE_EXPORTER_VERSION); do \
		$(K8S_BIN)/$${b%:*} --version 2>&1 | grep -F "version $${b#*:} " || { echo "$(K8S_BIN)/$${b%:*} is not version $${b#*:}"; exit 1; }; \
	done
	touch $@

## monitoring-crds: prometheus-operator v0.85.0's CRDs alone (part of test-tools: the e2e tests
## apply them to envtest; a module download, no build).
MONITORING_CRDS_STAMP := $(K8S_BIN)/.prometheus-operator-crds-$(PROMETHEUS_OPERATOR_VERSION)
.PHONY: monitoring-crds
monitoring monitoring-crds test-tools: $(MONITORING_CRDS_STAMP)
$(MONITORING_CRDS_STAMP): hack/tools/monitoring/prometheus-operator/go.mod hack/tools/monitoring/prometheus-operator/go.sum
	@mkdir -p $(K8S_BIN)
	rm -rf $(K8S_BIN)/prometheus-operator-crds $(K8S_BIN)/.prometheus-operator-crds-* && mkdir $(K8S_BIN)/prometheus-operator-crds
	cd hack/tools/monitoring/prometheus-operator && $(GO) mod download github.com/prometheus-operator/prometheus-operator
	cp $$(cd hack/tools/monitoring/prometheus-operator && $(GO) list -m -f '{{.Dir}}' github.com/prometheus-operator/prometheus-operator)/example/prometheus-operator-crd/*.yaml \
		$(K8S_BIN)/prometheus-operator-crds/
	chmod -R u+w $(K8S_BIN)/prometheus-operator-crds
	touch $@

## deps: dig and dnsperf, for the kubeadm cluster containerd, runc, the CNI plugins,
## iptables and conntrack, haproxy (the control-plane endpoint), and qemu-user (the arm images' binaries run under emulation in
## test/imagearchive), from Debian, when missing.
deps:
	@missing=""; \
	command -v dig >/dev/null || missing="$$missing bind9-dnsutils"; \
	command -v dnsperf >/dev/null || missing="$$missing dnsperf"; \
	command -v containerd >/dev/null || missing="$$missing containerd"; \
	command -v runc >/dev/null || missing="$$missing runc"; \
	[ -x /usr/lib/cni/bridge ] || missing="$$missing containernetworking-plugins"; \
	[ -x /usr/sbin/xtables-nft-multi ] || missing="$$missing iptables"; \
	command -v conntrack >/dev/null || missing="$$missing conntrack"; \
	command -v haproxy >/dev/null || missing="$$missing haproxy"; \
	command -v nsenter >/dev/null || missing="$$missing util-linux"; \
	command -v ip >/dev/null || missing="$$missing iproute2"; \
	command -v qemu-aarch64 >/dev/null || missing="$$missing qemu-user"; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing"; \
		$(APT_GET) update -qq && $(APT_GET) install -y -qq --no-install-recommends $$missing; \
	fi

## test: side by side, vet and the unit and integration tests with -race (every fuzz test's seed
## and regression corpus in testdata/fuzz runs as a test) with test/promrelabel's (its own module:
## Prometheus's relabel code), followed by each fuzz target for TEST_FUZZTIME on one worker, and
## the end-to-end tests under test/ without -race (they drive the real binaries, which -race would
## not instrument); then, alone on the machine's cores, the tests on the real two-node kubeadm
## cluster (test/realcluster; root), which bring it up, check it as built, share it, and check
## that its teardown leaves nothing behind.
#
# The real cluster starts once the e2e tests but E2E_LAST are done, beside E2E_LAST and the end
# of the fuzzing (neither times an answer); its tests, which do, wait for those to end
# (YURTDNS_TESTS_AFTER: the file their exit status goes to) and are not run if they failed.
test: prereqs
	@date -u +'[make test] %T vet, test-unit and fuzzing beside the e2e tests, $(E2E_LAST) last'
	@rm -f $(BIN)/pre-cluster.status $(BIN)/e2e-first.done
	@{ $(MAKE) -j2 test-unit-fuzz test-e2e-first-last; echo $$? > $(BIN)/pre-cluster.status; } & \
	while [ ! -e $(BIN)/e2e-first.done ] && [ ! -e $(BIN)/pre-cluster.status ]; do sleep 2; done; \
	date -u +'[make test] %T the real cluster starts; its tests wait for the ones before'; \
	YURTDNS_TESTS_AFTER=$(CURDIR)/$(BIN)/pre-cluster.status $(GO) test -count=1 -p 1 -timeout 85m -v ./test/realcluster 2>&1 | tee $(BIN)/cluster-test.txt | grep -E '^(=== RUN|\s*--- FAIL|--- |\s+\S+\.go:[0-9]+:|ok|FAIL|PASS|\[cluster\]|realcluster: |panic: |\s+running tests:|\s+Test\S* \([0-9])'; \
		status=$${PIPESTATUS[0]}; wait; pre=$$(cat $(BIN)/pre-cluster.status); \
		[ $$status = 0 ] || [ "$$pre" != 0 ] || awk -v dirs="./test/realcluster" -f hack/failures.awk $(BIN)/cluster-test.txt; \
		date -u +'[make test] %T done'; [ "$$pre" = 0 ] && [ $$status = 0 ]

# In make test, test-unit and then the fuzzing run side by side with the
# e2e tests (test-e2e-first), and then the longest e2e test (E2E_LAST: three
# control planes, no answer timed): the e2e tests mostly wait on the
# processes they drive while the -race builds and the fuzz workers fill the
# cores. E2E_LAST follows the other e2e tests rather than the fuzzing since
# the outage tests of issue 50 made them the shorter side (2026-11-29: e2e
# 16.5 min, beside -race unit tests and fuzzing 19.5 min, then E2E_LAST 7). Run beside the e2e
# tests once the fuzzing ended (a fresh clone, 2026-11-29), E2E_LAST only moved the time: the
# e2e tests took 19.5 min instead of 15, and the cluster's start no longer hid behind it. The e2e tests with a control plane of their own and no bound of a
# second or two on an answer run three at a time (t.Parallel), after the
# others. test-e2e runs them all.
E2E_LAST := TestInstallInterrupted
E2E_GO_TEST := $(GO) test -count=1 -timeout 30m -parallel 3
.PHONY: test-unit test-unit-fuzz test-e2e-first-last test-e2e test-e2e-first
test-unit:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 30m $$($(GO) list ./... | grep -v -e /test/)
	cd test/promrelabel && $(GO) vet ./... && $(GO) test -race -count=1 ./...
test-unit-fuzz: test-unit
	@date -u +'[make test] %T fuzzing'
	FUZZ_WORKERS=1 hack/fuzz.sh $(TEST_FUZZTIME)
test-e2e-first-last: test-e2e-first
	@date -u +'[make test] %T $(E2E_LAST)'
	$(E2E_GO_TEST) -run '^$(E2E_LAST)$$' ./test/e2e
test-e2e-first:
	$(E2E_GO_TEST) -skip '^$(E2E_LAST)$$' $$($(GO) list ./test/... | grep -v -e /test/realcluster)
	@date -u +'[make test] %T the e2e tests but $(E2E_LAST) done'
	@mkdir -p $(BIN) && touch $(BIN)/e2e-first.done
test-e2e:
	$(E2E_GO_TEST) $$($(GO) list ./test/... | grep -v -e /test/realcluster)

## fuzz: every Go fuzz test for FUZZTIME each (default 1m; FUZZTIME=10m for a soak).
## A crash writes its input to the package's testdata/fuzz: keep it as a regression test.
fuzz:
	hack/fuzz.sh $(FUZZTIME)

## soak: the fault and bad-input tests SOAK_COUNT times over (make test runs them once each), and
## TestInstallInterrupted killing install and revert at both points of every step (make test: one).
SOAK_COUNT ?= 3
soak: deps test-tools
	mkdir -p $(BIN)
	set -o pipefail; YURTDNS_INTERRUPT_EVERY_POINT=1 $(GO) test -count=$(SOAK_COUNT) -timeout 120m -v -run 'TestFault|TestInstallInterrupted|TestBadInput|TestLeastPrivilege' ./test/e2e/ | tee $(BIN)/soak.txt | grep -E '^(=== RUN|\s*--- FAIL|--- |\s+\S+_test.go:[0-9]+:|ok|FAIL|PASS)'

## bench: dnsperf (yurthosts vs hosts vs whoami), propagation, scale and sync benchmarks on the
## real binaries and apiserver, the fleet benchmarks (5,000 and 100,000 nodes); writes
## bench/results.md and bench/latency.svg (about 25 minutes, then the real-cluster benchmarks).
# BENCH_RUN names this run in every result file; benchreport refuses a mix. The commit, not
# VERSION: every build between two releases has the same VERSION.
BENCH_RUN := $(shell git describe --always --dirty 2>/dev/null || echo $(VERSION)) $(shell date -u +%Y-%m-%dT%H:%MZ)
bench: export YURTDNS_BENCH_RUN = $(BENCH_RUN)
bench: export YURTDNS_BENCH_OUT = $(CURDIR)/$(BIN)/bench-data
bench: prereqs
	rm -rf $(BIN)/bench-data
	set -o pipefail; $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 40m ./test/bench/ | tee $(BIN)/bench.txt
	set -o pipefail; $(GO) test -run '^$$' -bench . -benchmem ./plugin/... | tee -a $(BIN)/bench.txt
	set -o pipefail; $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 90m ./test/realcluster/ | tee -a $(BIN)/bench.txt
	$(GO) run ./hack/benchreport -in $(BIN)/bench-data -run '$(BENCH_RUN)' -out bench

## demo: the real two-node kubeadm cluster (root: network and mount namespaces), install, the
## sync, coredns-yurt on both nodes and dig answering node names from the apiserver's view;
## runs until Ctrl-C, then tears the cluster down.
demo: prereqs
	$(GO) build -o $(BIN)/yurtdns-demo ./test/demo
	$(BIN)/yurtdns-demo

## image: OCI image tarballs in bin/ (no container engine needed), each one image index with
## an image per platform (linux/amd64, linux/arm64, linux/arm/v7): static binary, CA
## certificates, user 65532; coredns-yurt's entrypoint is /coredns like the stock image.
## Fully qualified references: `ctr images import` keeps the name as written and the
## kubelet asks for the normalized docker.io/... one (install's default image flags).
image: cross
	$(GO) run ./hack/image $(call image_binaries,coredns-yurt) --entrypoint /coredns --bind-low-ports --ports 53/udp,53/tcp,9153/tcp \
		--ref docker.io/yurtdns/coredns-yurt:$(VERSION) --out $(BIN)/coredns-yurt.oci.tar
	$(GO) run ./hack/image $(call image_binaries,tunnel-nodes-sync) --entrypoint /tunnel-nodes-sync --ports 8080/tcp,8081/tcp \
		--ref docker.io/yurtdns/tunnel-nodes-sync:$(VERSION) --out $(BIN)/tunnel-nodes-sync.oci.tar

## release: what a user downloads for VERSION, in bin/release/VERSION/ (docs/release.md): each
## command for each platform of make cross (coredns-yurt-linux-amd64, -linux-arm64,
## -linux-armv7, the same for tunnel-nodes-sync), make image's two OCI archives, deploy/'s
## manifests with this version's images (hack/release: coredns-yurt.yaml, node-local-dns.yaml,
## ...) and SHA256SUMS over them all (`sha256sum -c SHA256SUMS`). It refuses a VERSION that is
## not semver, and a tree with uncommitted changes, which no commit could rebuild (ALLOW_DIRTY=1
## builds from one anyway).
RELEASE_DIR := $(BIN)/release/$(VERSION)
.PHONY: release
release:
	@[ -z "$$(git status --porcelain)" ] || [ "$(ALLOW_DIRTY)" = 1 ] || \
		{ echo "release: uncommitted changes (git status); ALLOW_DIRTY=1 releases them anyway"; exit 1; }
	rm -rf $(RELEASE_DIR)
	$(GO) run ./hack/release --version $(VERSION) --out $(RELEASE_DIR)
	$(MAKE) image VERSION=$(VERSION)
	for arch in $(CROSS_ARCHS); do \
		platform=linux-$$arch; [ $$arch != arm ] || platform=linux-armv7; \
		for c in $(COMMANDS); do cp $(BIN)/linux_$$arch/$$c $(RELEASE_DIR)/$$c-$$platform || exit 1; done; \
	done
	cp $(BIN)/coredns-yurt.oci.tar $(BIN)/tunnel-nodes-sync.oci.tar $(RELEASE_DIR)/
	cd $(RELEASE_DIR) && sha256sum * > SHA256SUMS && sha256sum --quiet -c SHA256SUMS
	ls -l $(RELEASE_DIR)

clean:
	rm -rf $(BIN)
