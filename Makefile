# kube-ipvs-proxy build and test entry points. `make test` is what CI runs.
GO ?= go
export PATH := $(PATH):/usr/local/go/bin
BIN := bin/kube-ipvs-proxy
PKGS := ./...

.PHONY: all build plan test unit lint apiserver e2e vm-e2e demo integration bench bench-vm bench-scale bench-vs-kube-proxy bench-plot fuzz clean

all: build

# The version comes from VERSION and git (hack/version.sh): --version,
# kubernetes_build_info and the "Version info" line at start.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$$(hack/version.sh)" -o $(BIN) ./cmd/kube-ipvs-proxy

# node-a's plan for examples/, without a cluster or a kernel.
plan: build
	./$(BIN) --dry-run --objects examples --hostname-override node-a --cluster-cidr 10.244.0.0/16,fd00:244::/32 --output text

# Every test: lint, unit tests (fuzz seed corpora and the golden dry-run
# plans included), the end-to-end tests against a real kube-apiserver
# (built first), and the real-kernel tests in the VM lab.
test: lint apiserver unit integration vm-e2e cluster-conformance

# As root, the unit tests also run against the host's kernel, each in a
# network namespace of its own; nft/'s TestSystemNftListsTheWrittenTable has
# Debian's nft (package nftables, installed with apt when missing) list the
# table the writer programs.
unit:
	@[ "$$(id -u)" != 0 ] || LOG_PREFIX=unit bash -c '. hack/lib.sh && apt_install nftables'
	$(GO) test -count=1 $(PKGS)

# gofmt, go vet (also of the VM lab's tests, built with -tags integration),
# and shellcheck over every shell script (hack/shellcheck.sh
# installs Debian's shellcheck with apt when it is missing); and
# hack/benchplot, a module of its own that ./... does not reach: its vet
# and its tests, which fail when BENCHMARKS.md's generated table or
# benchmarks/vs-kube-proxy.svg is not what the committed results render
# (a second or two warm; a fresh machine first fetches gonum.org/v1/plot);
# and the lab's flannel CNI plugin (hack/flannel/cni, another module);
# and the migration run's verdict rules (conformance/migration/verdict_test.sh)
# and what each node variant's load starts (conformance/migration/clients_test.sh).
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags integration $(PKGS)
	cd hack/benchplot && $(GO) vet ./... && $(GO) test -count=1 ./...
	cd hack/flannel && $(GO) vet ./cni/ && $(GO) test -count=1 ./cni/
	hack/shellcheck.sh
	conformance/migration/verdict_test.sh >/dev/null
	conformance/migration/clients_test.sh >/dev/null

# A real kube-apiserver and etcd (hack/k8s, the module that builds every
# upstream binary), built once into .cache/k8s/bin; a cold build takes ~4 minutes.
apiserver:
	hack/k8s/build.sh kube-apiserver etcd

# The end-to-end tests alone (they also run in make test's unit step).
e2e: apiserver
	KIP_APISERVER_BUILD=1 $(GO) test -count=1 -v ./integration/e2e/ ./integration/apiserver/ ./deploy/

# The proxy in real mode inside the VM, watching the host's kube-apiserver
# over qemu user networking: traffic follows a Service created through the
# API, healthz and metrics answer, --cleanup removes our state.
vm-e2e: apiserver
	KIP_APISERVER_BUILD=1 KIP_VME2E=1 $(GO) test -count=1 -v -timeout 20m ./integration/vme2e/

# The demo: apiserver + etcd, the VM with the proxy watching them,
# examples/ applied, traffic from the node, a pod and outside clients to
# every virtual server, backends that answered next to the plan, the
# proxy's metrics. Not in make test; hack/demo/doc.go says what it shows.
demo: apiserver
	KIP_APISERVER_BUILD=1 KIP_DEMO=1 $(GO) test -count=1 -v -timeout 20m ./hack/demo/

# Real-kernel tests: boots Debian's cloud kernel in qemu with the
# integration-tagged test binary (installs qemu, busybox, kmod and cpio with
# apt if missing; caches the kernel under .cache/vmlab). KERNEL=bullseye
# (5.10), bookworm (6.1, the default) or trixie (6.12) picks the Debian
# release whose cloud kernel boots, for it and for vm-e2e. Debian's iptables
# (nft and legacy) and ipset are staged into the VM for integration/leftovers,
# which makes kube-proxy's leftovers with them, and for integration/traffic's
# FORWARD policy DROP test (iptables-nft -P FORWARD DROP, -S FORWARD), with
# Debian's nft (1.0.6 on bookworm), which lists the ruleset there as an
# operator would; the proxy never runs them.
ifneq ($(KERNEL),)
export VMLAB_KERNEL := $(KERNEL)
endif
#
# ARCH=arm64: the same on Debian's arm64 cloud kernel under
# qemu-system-aarch64 (TCG), with GOARCH=arm64 test binaries, for the
# packages that need no staged host tools: the IPVS writer, the nftables
# writer and traffic (5 minutes, 9 cold). Not in make test (README.md,
# "Kernels"). TestLinksAddrsRedoesInterruptedDumps is skipped there: under
# the emulated arm64 CPU one dump of the addresses outlasts its churn's
# 20 ms pause, so every retry is interrupted; it measures the emulator's
# speed, not the architecture.
LAB_TOOLS := .cache/vmlab/lab-tools
ARM64_PACKAGES := ./integration/ipvswriter/ ./integration/nftwriter/ ./integration/traffic/
ifeq ($(ARCH),arm64)
integration:
	VMLAB_ARCH=arm64 VMLAB_TIMEOUT=$${VMLAB_TIMEOUT:-2400} hack/vmlab/run.sh '$(ARM64_PACKAGES)' -- -test.v \
		-test.skip '^TestLinksAddrsRedoesInterruptedDumps$$'
else
integration:
	hack/vmlab/stage-tools.sh $(LAB_TOOLS) iptables ipset nftables -- /usr/sbin/xtables-nft-multi \
		/usr/sbin/xtables-legacy-multi /usr/sbin/ipset /usr/lib/x86_64-linux-gnu/xtables /usr/sbin/nft >/dev/null
	VMLAB_EXTRA_TREE=$(LAB_TOOLS) hack/vmlab/run.sh ./integration/... -- -test.v
endif

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./policy/

# Data-plane benchmarks in the VM, against ipvsadm -R and nft -f (staged
# into the VM with their libraries). Not part of make test.
bench-vm:
	hack/vmlab/stage-tools.sh .cache/vmlab/tools ipvsadm nftables -- /sbin/ipvsadm /usr/sbin/nft
	VMLAB_EXTRA_TREE=.cache/vmlab/tools VMLAB_MEM=2048 VMLAB_TIMEOUT=3000 \
		hack/vmlab/run.sh ./integration/bench/ -- -test.run '^$$' -test.bench . -test.benchtime 1x -test.v

# The proxy at scale: the working tree's binary in the VM
# against an apiserver holding SERVICES services × 10 endpoints; cold
# start, idle, endpoint and service churn, memory, restart, --cleanup.
# BASE=<git rev or binary> measures that proxy too, in the same boot;
# ROUNDS=3 interleaves them three times (the base first in odd rounds, the
# tree in even ones). Results: .cache/bench-scale/.
# Not part of make test; integration/benchscale/doc.go has the knobs.
SERVICES ?= 1000 10000
ROUNDS ?= 1
bench-scale: apiserver
	KIP_APISERVER_BUILD=1 KIP_BENCH_SCALE=1 KIP_BENCH_SCALE_SERVICES='$(SERVICES)' \
		KIP_BENCH_SCALE_BASE='$(BASE)' KIP_BENCH_SCALE_ROUNDS='$(ROUNDS)' \
		$(GO) test -count=1 -v -timeout 0 -run '^TestScale$$' ./integration/benchscale/

# Upstream kube-proxy v1.36.3 (--proxy-mode=ipvs; hack/k8s/build.sh
# kube-proxy builds it if .cache/k8s/bin lacks it) and the working tree's
# proxy, one after the other in one VM boot against an apiserver holding
# SERVICES services × 10 endpoints (default 1000 5000 10000), ROUNDS times
# each (default 3; kube-proxy first in odd rounds, ours in even): IPVS table
# complete and CPU until then, own first sync, endpoint change → kernel,
# RSS. iptables and ipset are staged into the VM for kube-proxy. Results:
# .cache/bench-scale/vs-kube-proxy-*, and the JSON also in
# benchmarks/vs-kube-proxy/ to commit, then make bench-plot. Not part of
# make test.
VS_SERVICES := $(if $(filter file,$(origin SERVICES)),1000 5000 10000,$(SERVICES))
VS_ROUNDS := $(if $(filter file,$(origin ROUNDS)),3,$(ROUNDS))
bench-vs-kube-proxy: apiserver
	hack/vmlab/stage-tools.sh $(LAB_TOOLS) iptables ipset -- /usr/sbin/xtables-nft-multi \
		/usr/sbin/xtables-legacy-multi /usr/sbin/ipset /usr/lib/x86_64-linux-gnu/xtables >/dev/null
	VMLAB_EXTRA_TREE=$(LAB_TOOLS) KIP_APISERVER_BUILD=1 KIP_BENCH_VS_KUBE_PROXY=1 \
		KIP_BENCH_SCALE_SERVICES='$(VS_SERVICES)' KIP_BENCH_SCALE_ROUNDS='$(VS_ROUNDS)' \
		$(GO) test -count=1 -v -timeout 0 -run '^TestVsKubeProxy$$' ./integration/benchscale/

# BENCHMARKS.md's table of kube-proxy against ours (between its
# "make bench-plot" markers) and benchmarks/vs-kube-proxy.svg, rendered
# from the committed benchmarks/vs-kube-proxy/*.json by hack/benchplot
# (its own module, for gonum.org/v1/plot; hack/benchplot/doc.go). Runs no
# benchmark. make lint fails while BENCHMARKS.md or the plot is not what
# it would write.
bench-plot:
	cd hack/benchplot && $(GO) run . -results ../../benchmarks/vs-kube-proxy \
		-benchmarks ../../BENCHMARKS.md -svg ../../benchmarks/vs-kube-proxy.svg

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzLoad -fuzztime 30s ./manifest/
	$(GO) test -run '^$$' -fuzz FuzzLoadConfig -fuzztime 30s -fuzzminimizetime 3s ./cmd/kube-ipvs-proxy/app/
	$(GO) test -run '^$$' -fuzz FuzzEndpointSlice -fuzztime 30s ./apiconv/
	$(GO) test -run '^$$' -fuzz FuzzDryRunManifest -fuzztime 60s ./cmd/kube-ipvs-proxy/app/
	$(GO) test -run '^$$' -fuzz FuzzCompute -fuzztime 30s ./policy/
	$(GO) test -run '^$$' -fuzz FuzzParseDestinations -fuzztime 30s ./proxier/ipvs/ipvsnl/
	$(GO) test -run '^$$' -fuzz FuzzParseVirtualServers -fuzztime 30s ./proxier/ipvs/ipvsnl/
	$(GO) test -run '^$$' -fuzz FuzzSplitAnswer -fuzztime 30s ./proxier/ipvs/ipvsnl/
	$(GO) test -run '^$$' -fuzz FuzzReadAcks -fuzztime 30s ./proxier/ipvs/ipvsnl/
	$(GO) test -run '^$$' -fuzz FuzzParseDestinationCounts -fuzztime 30s ./proxier/ipvs/
	$(GO) test -run '^$$' -fuzz FuzzWalkReadsWhatMdlayherReads -fuzztime 30s ./internal/nlattr/
	$(GO) test -run '^$$' -fuzz FuzzSplit -fuzztime 30s ./internal/nlsock/
	$(GO) test -run '^$$' -fuzz FuzzParseAddrMessage -fuzztime 30s ./proxier/ipvs/ipvsnl/
	$(GO) test -run '^$$' -fuzz FuzzDecodeNotification -fuzztime 30s ./nft/
	$(GO) test -run '^$$' -fuzz FuzzParseSetElementsReadsWhatNftablesReads -fuzztime 30s ./nft/
	$(GO) test -run '^$$' -fuzz FuzzRewriteCtExprs -fuzztime 30s ./nft/
	$(GO) test -run '^$$' -fuzz FuzzXtChainRules -fuzztime 30s ./proxier/leftovers/
	$(GO) test -run '^$$' -fuzz FuzzSpliceXtTable -fuzztime 30s ./proxier/leftovers/
	$(GO) test -run '^$$' -fuzz FuzzCountCPUList -fuzztime 30s ./conntrack/

clean:
	rm -rf bin

# --- A real cluster in the lab, and upstream's e2e suite against it ---------
# (hack/cluster/README.md, conformance/README.md).
.PHONY: cluster cluster-down image release e2e-upstream cluster-conformance migration migration-matrix
NODES ?= 1
ZONES ?= $(NODES)
FAMILY ?= ipv4

# etcd, kube-apiserver, controller-manager and scheduler in the network
# namespace "kiplab", NODES qemu VMs with containerd and the kubelet (one
# zone each unless ZONES says fewer), CoreDNS, and the proxy's DaemonSet
# applied with kubectl apply -k.
# KUBE_PROXY=upstream: upstream kube-proxy v1.36.3 in IPVS mode instead of
# ours, deployed by `kubeadm init phase addon kube-proxy` (the swap's start).
KUBE_PROXY ?= ours
cluster:
	NODES=$(NODES) ZONES=$(ZONES) FAMILY=$(FAMILY) KIP_KUBE_PROXY=$(KUBE_PROXY) hack/cluster/up.sh

cluster-down:
	hack/cluster/down.sh

# The proxy's image, the one we ship and the lab runs, built without Docker
# (go-containerregistry, hack/k8s/kimg): an image index for linux/amd64,
# arm64, ppc64le and s390x (ARCHES picks fewer), each image with the static
# binary built for its GOARCH at /usr/local/bin/kube-ipvs-proxy and at
# kube-proxy's /usr/local/bin/kube-proxy, its CycloneDX SBOM, the LICENSE
# and Debian's CA certificates of a pinned version. Reproducible: the same
# commit gives the same index digest. Into .cache/cluster/images/:
# kube-ipvs-proxy.oci (an OCI image layout of the index, named by the
# version) and kube-ipvs-proxy.tar (the build host's image as a docker
# archive: ctr -n k8s.io images import it, or docker load it). The version
# (hack/version.sh) is in --version, the OCI labels, kubernetes_build_info
# and the archive's second tag. Prints the reference, digests, layout,
# archive and version. IMAGE names it; PUSH=REGISTRY/kube-ipvs-proxy:TAG
# also pushes the index.
IMAGE ?= localhost/kube-ipvs-proxy:lab
ARCHES ?= amd64 arm64 ppc64le s390x
image:
	KIP_PROXY_IMAGE='$(IMAGE)' KIP_PROXY_PUSH='$(PUSH)' KIP_PROXY_ARCHES='$(ARCHES)' hack/cluster/images.sh proxy

# A release: make release VERSION=X.Y.Z at the commit that set VERSION to
# X.Y.Z (README.md, "Versions and releases") writes dist/vX.Y.Z/: the
# image index as an OCI image layout (kube-ipvs-proxy.oci, named vX.Y.Z),
# each platform's binary and SBOM, and SHA256SUMS; kimg's TestShippedLayout
# checks the layout. Push it with skopeo copy --all oci:... or crane push.
release:
	KIP_PROXY_ARCHES='$(ARCHES)' hack/cluster/images.sh release '$(VERSION)'

# Upstream's e2e.test against the cluster; FOCUS defaults to \[sig-network\],
# conformance/skips.txt lists the skips with their reasons.
e2e-upstream:
	FOCUS='$(FOCUS)' conformance/run.sh

# The migration run: a two-node cluster that starts with upstream kube-proxy
# in IPVS mode (kubeadm's addon), load through the image swap to ours, the
# rollback and the old documented path (control); upstream's Services
# Conformance specs after the swap. Not part of make test (about 40
# minutes); results in conformance/migration/RESULTS.md.
migration:
	conformance/migrate.sh

# The node matrix: the migration run once per node variant (a cluster
# brought up for each: hack/cluster/variant.sh), each variant's last
# result kept in conformance/migration/RESULTS.md. Phases: swap, config,
# rollback, control (upstream's e2e is make migration's);
# KIP_MIGRATION_PHASES chooses others.
VARIANTS ?= no-cluster-cidr forward-drop forward-drop-nft legacy nodelocaldns flannel metallb-l2
migration-matrix:
	conformance/matrix.sh $(VARIANTS)

# make test's step: a one-node IPv4 cluster of its own (netns kipci), the
# \[sig-network\] Services.*\[Conformance\] specs, the cluster down again.
cluster-conformance:
	conformance/ci.sh
