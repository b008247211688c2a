#!/usr/bin/env bash
# The node variant `flannel` (variant.sh): flannel in VXLAN mode as the
# cluster's CNI in place of the lab's own (kip-cni's bridge config and the
# namespace's podCIDR routes), deployed as its kube-flannel manifest does:
# a DaemonSet whose init containers install the CNI plugin and
# cni-conf.json, flanneld with --kube-subnet-mgr (each Node's podCIDR is
# its subnet) and --ip-masq, reaching the API server through the
# `kubernetes` ClusterIP, so after kube-proxy.
#
#   hack/cluster/flannel.sh image     # build what is stale; print the image archive's path
#   hack/cluster/flannel.sh deploy    # apply manifests/flannel/ to the running cluster;
#                                     # wait for the rollout and every node's flannel.1
#   hack/cluster/flannel.sh script    # the node script variant.sh runs before the
#                                     # add-ons: the lab's CNI config goes
#
# The image (ghcr.io/flannel-io/flannel:<version>, upstream's name, so the
# manifest reads as upstream's): flanneld and install-conf built from
# github.com/flannel-io/flannel at hack/flannel/go.mod's version, and at
# /flannel the lab's flannel CNI plugin (hack/flannel/cni: upstream's
# cni-plugin module is not served here), on kube-proxy's Debian base
# (iptables, which flanneld execs) with the lab's iptables-wrapper, as
# upstream's image has. Binaries under .cache/cluster/flannel/<version>-<key>/,
# the archive .cache/cluster/flannel/flannel.tar; <key> hashes
# hack/flannel's files. up.sh puts the archive on the nodes' config disks
# (early images) on flannel clusters only.
set -euo pipefail
shopt -s inherit_errexit
# shellcheck source=hack/cluster/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

FLANNEL_MOD=$REPO/hack/flannel
FLANNEL_VERSION=$(awk '$1 == "github.com/flannel-io/flannel" && $2 ~ /^v[0-9]/ { print $2; exit }' "$FLANNEL_MOD/go.mod")
[[ -n $FLANNEL_VERSION ]] || die "no github.com/flannel-io/flannel version in $FLANNEL_MOD/go.mod"
FLANNEL_IMAGE=ghcr.io/flannel-io/flannel:$FLANNEL_VERSION
OUT=$CACHE/flannel

# binaries: flanneld, install-conf and the CNI plugin, built once per
# version and hack/flannel content; prints their directory.
binaries() {
	local key dir tmp
	key=$(cd "$FLANNEL_MOD" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
	dir=$OUT/$FLANNEL_VERSION-$key
	if [[ ! -x $dir/flannel ]]; then
		log "building flanneld $FLANNEL_VERSION, install-conf and the CNI plugin (minutes when cold)"
		tmp=$(mktemp -d "$OUT/.build.XXXXXX")
		# As flannel's Makefile builds it for amd64: cgo on (the udp
		# backend's C proxy; without it the build fails there), linked static.
		(cd "$FLANNEL_MOD" && CGO_ENABLED=$([[ $(go env GOARCH) == amd64 ]] && echo 1 || echo 0) nice -n 10 \
			go build -trimpath -ldflags "-s -w -X github.com/flannel-io/flannel/pkg/version.Version=$FLANNEL_VERSION -extldflags -static" \
			-o "$tmp/flanneld" github.com/flannel-io/flannel &&
			CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "-s -w" -o "$tmp/install-conf" \
				github.com/flannel-io/flannel/cmd/install_conf &&
			CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "-s -w" -o "$tmp/flannel" ./cni) ||
			{ rm -rf "$tmp"; die "building flannel $FLANNEL_VERSION failed"; }
		rm -rf "$OUT/$FLANNEL_VERSION"-*/
		mv "$tmp" "$dir"
	fi
	echo "$dir"
}

# image: the docker archive, rebuilt when its inputs change; prints its path.
image() {
	local bin base w key links=() c
	mkdir -p "$OUT"
	exec 8>"$OUT/.lock"
	flock 8
	bin=$(binaries)
	"$CLUSTER_DIR/images.sh" kube-proxy >/dev/null # kube-proxy's Debian base
	base=$(compgen -G "$CACHE/kube-proxy-base-*.tar" | head -n1)
	[[ -n $base ]] || die "no kube-proxy base tarball under $CACHE (images.sh kube-proxy)"
	w=$CLUSTER_DIR/iptables-wrapper
	for c in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
		links+=(-link "/usr/sbin/$c:iptables-wrapper")
	done
	key=$({ sha256sum "$bin"/* "$base" "$w" "${BASH_SOURCE[0]}" | cut -c1-64; echo "$FLANNEL_IMAGE"; } | sha256sum | cut -c1-16)
	if [[ ! -e $OUT/flannel.tar || $(cat "$OUT/flannel.key" 2>/dev/null) != "$key" ]]; then
		log "image $FLANNEL_IMAGE"
		"$K8S_BIN/kimg" -out "$OUT/flannel.tar" -tag "$FLANNEL_IMAGE" -rootfs "$base" \
			-file "$bin/flanneld:/opt/bin/flanneld:0755" -file "$bin/install-conf:/opt/bin/install-conf:0755" \
			-file "$bin/flannel:/flannel:0755" -file "$w:/usr/sbin/iptables-wrapper:0755" "${links[@]}" \
			-entrypoint /opt/bin/flanneld >"$OUT/flannel.ref"
		echo "$key" >"$OUT/flannel.key"
	fi
	echo "$OUT/flannel.tar"
}

# flannel_up <node>: the node's flanneld wrote its lease and published its
# VTEP (the kube-subnet-mgr's annotation that the other nodes route by).
flannel_up() {
	kc get node "$1" -o jsonpath='{.metadata.annotations.flannel\.alpha\.coreos\.com/backend-data}' | grep -q VNI
}

deploy() {
	local i
	[[ -e $RUN/cluster.env ]] || die "no cluster (make cluster)"
	# shellcheck source=/dev/null
	. "$RUN/cluster.env"
	[[ $FAMILY == ipv4 ]] || die "node variant flannel: FAMILY=$FAMILY; the variant is IPv4 only"
	log "flannel $FLANNEL_VERSION (vxlan, kube-subnet-mgr): manifests/flannel"
	sed -e "s|__NETWORK__|$POD_CIDR4|" -e "s|__IMAGE__|$FLANNEL_IMAGE|" \
		"$CLUSTER_DIR/manifests/flannel/kube-flannel.yaml" | kc apply -f - >&2
	kc -n kube-flannel rollout status ds/kube-flannel-ds --timeout=10m >&2
	for ((i = 1; i <= NODES; i++)); do
		wait_for 300 "$(node_name "$i")'s flannel lease" flannel_up "$(node_name "$i")"
	done
}

case ${1:-} in
image)
	"$REPO/hack/k8s/build.sh" kimg >/dev/null
	image
	;;
deploy) deploy ;;
script)
	# The lab's CNI config (kip-cni) goes before any pod needs one, so
	# the first pod networks come from flannel's; the nodes stay NotReady
	# until flannel's install-cni writes 10-flannel.conflist.
	echo "set -e"
	echo "rm -fv /etc/cni/net.d/10-kip.conflist"
	echo "ls -l /etc/cni/net.d"
	;;
*) die "usage: flannel.sh image|deploy|script" ;;
esac
