#!/usr/bin/env bash
# MetalLB in L2 mode beside the proxy (the node variant metallb-l2,
# variant.sh), as MetalLB's own guide installs it: its native manifest
# (config/manifests/metallb-native.yaml of the go.universe.tf/metallb
# module: CRDs, RBAC, the controller Deployment, the speaker DaemonSet),
# then an IPAddressPool of the lab's bridge subnet and an L2Advertisement
# (manifests/metallb/). The controller and the speaker are built from that
# module's release (hack/metallb/go.mod) into images with upstream's names
# and tags (quay.io/metallb/*:vX.Y.Z), which the manifest's pods find
# IfNotPresent once load-image.sh has imported them.
#
#   hack/cluster/metallb.sh images     # build the binaries and images if stale; print their dir
#   hack/cluster/metallb.sh up         # on the running cluster: import the images, apply
#                                      # MetalLB, wait for it, apply the pool and L2Advertisement
#   hack/cluster/metallb.sh version    # the MetalLB release hack/metallb/go.mod pins
#   hack/cluster/metallb.sh arp IP...  # from the lab's netns (an outside client): the MACs that
#                                      # answer ARP for each IP, the node each MAC is, and the
#                                      # node MetalLB says announces it
#
# One change from the manifest as shipped: its ValidatingWebhookConfiguration
# goes and the controller runs --webhook-mode=disabled. The lab's API server
# runs on the host, off the nodes, and routes no ClusterIP; with the
# webhook's failurePolicy Fail it would refuse every IPAddressPool. The
# webhook only validates MetalLB's own objects; the datapath is unchanged.
#
# Output: <repo>/.cache/metallb/<version>-<key>/ (controller, speaker and
# their docker archives), key the sha256 of hack/metallb's go.mod and
# go.sum; the archives are remade when the binaries or their kimg
# arguments change. Not under .cache/cluster/images/, whose archives go on
# every lab cluster's nodes.
set -euo pipefail
shopt -s inherit_errexit
# shellcheck source=hack/cluster/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

MOD=$REPO/hack/metallb
MANIFESTS=$CLUSTER_DIR/manifests/metallb
METALLB_VERSION=$(awk '$1 == "go.universe.tf/metallb" && $2 ~ /^v[0-9]/ { print $2; exit }' "$MOD/go.mod")
[[ -n $METALLB_VERSION ]] || die "no go.universe.tf/metallb version in $MOD/go.mod"
OUT=$REPO/.cache/metallb/$METALLB_VERSION-$(cat "$MOD/go.mod" "$MOD/go.sum" "$MOD/frr-k8s.patch" | sha256sum | cut -c1-12)
# The frr-k8s release MetalLB's build uses, patched (hack/metallb/go.mod
# says why), at the path go.mod's replace names.
FRR_VERSION=v0.0.26
FRR_DIR=$REPO/.cache/metallb/frr-k8s

# prepare_frr: frr-k8s $FRR_VERSION from the module cache with
# frr-k8s.patch applied, in FRR_DIR, unless it is there already.
prepare_frr() {
	local stamp src
	stamp=$({ echo "$FRR_VERSION"; cat "$MOD/frr-k8s.patch"; } | sha256sum | cut -c1-16)
	[[ $(cat "$FRR_DIR/.kip-stamp" 2>/dev/null) == "$stamp" ]] && return 0
	src=$(cd / && go mod download -json "github.com/metallb/frr-k8s@$FRR_VERSION" | awk -F'"' '$2 == "Dir" { print $4 }')
	[[ -d $src ]] || die "github.com/metallb/frr-k8s@$FRR_VERSION: not in the module cache after go mod download"
	log "frr-k8s $FRR_VERSION with hack/metallb/frr-k8s.patch into $FRR_DIR"
	rm -rf "$FRR_DIR.tmp" "$FRR_DIR"
	mkdir -p "$(dirname "$FRR_DIR")"
	cp -r "$src" "$FRR_DIR.tmp"
	chmod -R u+w "$FRR_DIR.tmp"
	patch -s -p1 -d "$FRR_DIR.tmp" <"$MOD/frr-k8s.patch" || die "hack/metallb/frr-k8s.patch does not apply to frr-k8s $FRR_VERSION"
	echo "$stamp" >"$FRR_DIR.tmp/.kip-stamp"
	mv "$FRR_DIR.tmp" "$FRR_DIR"
}

# build_binaries: controller and speaker, unchanged mains of MetalLB's
# module, static, into $OUT (once per key).
build_binaries() {
	local b
	mkdir -p "$OUT"
	prepare_frr
	for b in controller speaker; do
		[[ -x $OUT/$b ]] && continue
		log "go build go.universe.tf/metallb/$b $METALLB_VERSION (minutes when cold)"
		(cd "$MOD" && CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "-s -w" -o "$OUT/$b.tmp" \
			"go.universe.tf/metallb/$b") || die "building MetalLB's $b failed"
		mv "$OUT/$b.tmp" "$OUT/$b"
	done
}

# image <name> <kimg args...>: $OUT/<name>.tar, remade when the binary,
# kimg or the arguments change.
image() {
	local name=$1 key
	shift
	key=$({ sha256sum "$OUT/$name" "$K8S_BIN/kimg" | cut -c1-64; echo "$*"; } | sha256sum | cut -c1-16)
	[[ -e $OUT/$name.tar && $(cat "$OUT/$name.key" 2>/dev/null) == "$key" ]] && return 0
	log "image quay.io/metallb/$name:$METALLB_VERSION"
	"$K8S_BIN/kimg" -out "$OUT/$name.tar" "$@" >"$OUT/$name.ref"
	echo "$key" >"$OUT/$name.key"
}

# build_images: the two images as upstream's Dockerfiles make them: the
# binary at / as the entrypoint and MetalLB's LICENSE, on an empty base
# (upstream's is distroless/static; the binaries are static and read no
# file of it). The controller runs as 65534 by the manifest's pod
# securityContext, the speaker as root with NET_RAW only.
build_images() {
	local mod_dir b
	"$REPO/hack/k8s/build.sh" kimg >/dev/null
	build_binaries
	mod_dir=$(cd "$MOD" && go list -m -f '{{.Dir}}' go.universe.tf/metallb)
	for b in controller speaker; do
		image "$b" -tag "quay.io/metallb/$b:$METALLB_VERSION" \
			-file "$OUT/$b:/$b:0755" -file "$mod_dir/LICENSE:/LICENSE:0644" -dir /tmp:1777 \
			-entrypoint "/$b" -label "org.opencontainers.image.version=$METALLB_VERSION" \
			-label org.opencontainers.image.source=https://github.com/metallb/metallb
	done
}

# render <dir>: the module's native manifest beside manifests/metallb's
# kustomization (the webhook change), ready for `kubectl apply -k`.
render() {
	local dir=$1 mod_dir
	prepare_frr
	mod_dir=$(cd "$MOD" && go list -m -f '{{.Dir}}' go.universe.tf/metallb)
	rm -rf "$dir"
	mkdir -p "$dir"
	cp "$mod_dir/config/manifests/metallb-native.yaml" "$dir/"
	cp "$MANIFESTS/kustomization.yaml" "$dir/"
}

up() {
	[[ -e $RUN/cluster.env ]] || die "no cluster (make cluster)"
	# shellcheck source=/dev/null
	. "$RUN/cluster.env"
	build_images
	"$CLUSTER_DIR/load-image.sh" "$OUT/controller.tar" "$OUT/speaker.tar"
	render "$RUN/metallb"
	log "MetalLB $METALLB_VERSION: kubectl apply -k (its native manifest, webhook off)"
	kc apply -k "$RUN/metallb" >&2
	kc wait --for=condition=Established --timeout=2m crd/ipaddresspools.metallb.io crd/l2advertisements.metallb.io >&2
	kc -n metallb-system rollout status deploy/controller --timeout=5m >&2
	kc -n metallb-system rollout status ds/speaker --timeout=5m >&2
	kc apply -f "$MANIFESTS/l2.yaml" >&2
	kc -n metallb-system get pods -o wide >&2
}

# node_of_mac <mac>: the lab node whose eth0 has the MAC (up.sh gives
# node-N 52:54:00:88:00:<10+N in hex>), else the MAC itself.
node_of_mac() {
	local mac=${1,,} i
	for ((i = 1; i <= NODES; i++)); do
		[[ $mac == "52:54:00:88:00:$(printf %02x $((10 + i)))" ]] && { node_name "$i"; return 0; }
	done
	echo "$mac"
}

# announcer <ip>: the node MetalLB's ServiceL2Status names for the
# Service holding ip as its load-balancer address ("none" if none does).
announcer() {
	local ip=$1 svc
	svc=$(kc get svc -A -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name} {.status.loadBalancer.ingress[*].ip}{"\n"}{end}' |
		awk -v ip="$ip" '!found { for (i = 2; i <= NF; i++) if ($i == ip) { print $1; found = 1 } }')
	[[ -n $svc ]] || { echo none; return 0; }
	kc -n metallb-system get servicel2statuses.metallb.io \
		-o jsonpath='{range .items[*]}{.status.serviceNamespace}/{.status.serviceName} {.status.node}{"\n"}{end}' |
		awk -v svc="$svc" '$1 == svc && !found { print $2; found = 1 } END { if (!found) print "none" }'
}

# arp <ip>...: per ip, one line "<ip> macs=<n> replies=<mac>=<node>,...
# announcer=<node>": arping from the lab's bridge, broadcast requests only
# (-b), so every node that would answer is asked each time.
arp() {
	local ip out macs n m replies
	[[ -e $RUN/cluster.env ]] || die "no cluster (make cluster)"
	# shellcheck source=/dev/null
	. "$RUN/cluster.env"
	apt_install iputils-arping
	for ip in "$@"; do
		out=$(in_ns arping -b -c 4 -w 6 -I "$BRIDGE" "$ip" 2>&1 || true)
		macs=$({ grep -oiE '\[([0-9a-f]{2}:){5}[0-9a-f]{2}\]' <<<"$out" || true; } | tr -d '[]' | tr '[:upper:]' '[:lower:]' | sort -u)
		n=0 replies=""
		for m in $macs; do
			n=$((n + 1))
			replies+="${replies:+,}$m=$(node_of_mac "$m")"
		done
		echo "$ip macs=$n replies=${replies:-none} announcer=$(announcer "$ip")"
	done
}

case ${1:-} in
images)
	build_images
	echo "$OUT"
	;;
up) up ;;
version) echo "$METALLB_VERSION" ;;
arp)
	shift
	(($# > 0)) || die "usage: metallb.sh arp IP..."
	arp "$@"
	;;
*) die "usage: metallb.sh images|up|version|arp IP..." ;;
esac
