#!/usr/bin/env bash
# Builds the lab's container images as docker archives, without Docker
# (hack/k8s's kimg, go-containerregistry), with upstream's names and tags so
# pods that say IfNotPresent find them after `ctr images import`:
#
#   registry.k8s.io/pause:3.10.2                       ours (hack/k8s/cmd/pause)
#   registry.k8s.io/e2e-test-images/agnhost:2.63.0     upstream's agnhost on a Debian base
#     (also :2.55)                                     with curl, wget, nc, dig, iproute2, iperf, bash,
#                                                      and CoreDNS at /coredns as upstream's
#   registry.k8s.io/e2e-test-images/glibc-dns-testing:2.0.0   the same Debian base
#   registry.k8s.io/build-image/distroless-iptables:v0.9.6     the same Debian base (conntrack)
#   registry.k8s.io/e2e-test-images/busybox:1.37.0-1   Debian's busybox-static
#   registry.k8s.io/e2e-test-images/regression-issue-74839:1.4   upstream's main of that name
#   registry.k8s.io/coredns/coredns:v1.15.0            CoreDNS (hack/k8s/coredns)
#   localhost/kube-ipvs-proxy:lab                      this repo's proxy (`make image`, the one
#                                                      definition of the image we ship)
#
#   hack/cluster/images.sh all           # build what is stale; print the archive dir
#   hack/cluster/images.sh proxy         # only the proxy's image (`make image`): print its
#                                        # reference, digest, archive and version
#   hack/cluster/images.sh kube-proxy    # also upstream's kube-proxy v1.36.3 image
#                                        # (registry.k8s.io/kube-proxy:v1.36.3, Debian base
#                                        # with iptables, ipset, conntrack, kmod)
#   hack/cluster/images.sh base          # only the Debian base tarball; print its path
#
# Output: <repo>/.cache/cluster/images/*.tar. Each archive is rebuilt when
# the sha256 of its inputs (binaries, base tarball, this script) changes.
# The Debian base is made with mmdebstrap and cached keyed on its package
# versions. `proxy` builds only the proxy's image (`make image`);
# KIP_PROXY_IMAGE names it (default localhost/kube-ipvs-proxy:lab) and
# KIP_PROXY_PUSH=REF also pushes it to a registry (docker's credentials).
set -euo pipefail
shopt -s inherit_errexit
# shellcheck source=hack/cluster/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

OUT=$CACHE/images
PROXY_TAG=${KIP_PROXY_IMAGE:-localhost/kube-ipvs-proxy:lab}
BASE_PACKAGES=(bash curl wget netcat-openbsd dnsutils iproute2 iperf util-linux iputils-ping
	procps ca-certificates conntrack)
K8S_MOD=$(cd "$REPO/hack/k8s" && go list -m -f '{{.Dir}}' k8s.io/kubernetes 2>/dev/null) ||
	die "k8s.io/kubernetes is not in the module cache (run hack/k8s/build.sh first)"

mkdir -p "$OUT"
exec 8>"$OUT/.lock"
flock 8

# image <archive name> <input files (space separated)> <kimg args...>:
# builds $OUT/<name>.tar unless its inputs' hash is unchanged.
image() {
	local name=$1 inputs=$2 key
	shift 2
	# shellcheck disable=SC2086 # inputs is a word list of paths
	key=$({ sha256sum $inputs "${BASH_SOURCE[0]}" | cut -c1-64; echo "$*"; } | sha256sum | cut -c1-16)
	if [[ -e $OUT/$name.tar && $(cat "$OUT/$name.key" 2>/dev/null) == "$key" ]]; then
		return 0
	fi
	log "image $name"
	# kimg prints "<first tag> <digest>": kept beside the archive.
	"$K8S_BIN/kimg" -out "$OUT/$name.tar" "$@" >"$OUT/$name.ref"
	echo "$key" >"$OUT/$name.key"
}

# minbase <dir> <package...>: a bookworm minbase rootfs with the packages,
# without docs, man pages and locales.
minbase() {
	local dir=$1
	shift
	nice -n 10 mmdebstrap --mode=root --variant=minbase --include="$(IFS=,; echo "$*")" \
		--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' \
		bookworm "$dir" "deb http://deb.debian.org/debian bookworm main" \
		"deb http://deb.debian.org/debian-security bookworm-security main" >&2
}

# debian_base: a bookworm rootfs tarball with the tools agnhost's tests
# exec, plus agnhost's image user and group; prints its path.
debian_base() {
	local vers key out root p v
	vers=$(for p in "${BASE_PACKAGES[@]}"; do
		v=$(apt-cache policy "$p" | awk '/Candidate:/ { print $2; exit }')
		echo "$p $v"
	done)
	key=$({ echo "$vers"; declare -f debian_base minbase; } | sha256sum | cut -c1-16)
	out=$CACHE/debian-base-$key.tar
	if [[ ! -e $out ]]; then
		log "mmdebstrap the agnhost base (${BASE_PACKAGES[*]})"
		root=$(mktemp -d "$CACHE/.base.XXXXXX")
		minbase "$root/rootfs" "${BASE_PACKAGES[@]}"
		# As upstream's agnhost Dockerfile: a user and a group defined in the image.
		echo "user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh" >>"$root/rootfs/etc/passwd"
		echo "user-defined-in-image:x:1000:" >>"$root/rootfs/etc/group"
		echo "group-defined-in-image:x:50000:user-defined-in-image" >>"$root/rootfs/etc/group"
		mkdir -p "$root/rootfs/usr/local/bin" && ln -sf /usr/bin/iperf "$root/rootfs/usr/local/bin/iperf"
		rm -rf "$root/rootfs/var/cache/apt"/* "$root/rootfs/var/lib/apt/lists"/*
		tar --numeric-owner -C "$root/rootfs" -cf "$out.tmp" .
		rm -rf "$root"
		rm -f "$CACHE"/debian-base-*.tar
		mv "$out.tmp" "$out"
	fi
	echo "$out"
}

# kube_proxy_base: a bookworm rootfs tarball with what upstream's
# kube-proxy image (distroless-iptables) carries for its IPVS mode:
# iptables (nft by default, legacy beside it), ipset, conntrack, kmod;
# prints its path.
kube_proxy_base() {
	local pkgs=(iptables ipset conntrack kmod ca-certificates) vers key out root p v
	vers=$(for p in "${pkgs[@]}"; do
		v=$(apt-cache policy "$p" | awk '/Candidate:/ { print $2; exit }')
		echo "$p $v"
	done)
	key=$({ echo "$vers"; declare -f kube_proxy_base minbase; } | sha256sum | cut -c1-16)
	out=$CACHE/kube-proxy-base-$key.tar
	if [[ ! -e $out ]]; then
		log "mmdebstrap kube-proxy's base (${pkgs[*]})"
		root=$(mktemp -d "$CACHE/.base.XXXXXX")
		minbase "$root/rootfs" "${pkgs[@]}"
		rm -rf "$root/rootfs/var/cache/apt"/* "$root/rootfs/var/lib/apt/lists"/*
		tar --numeric-owner -C "$root/rootfs" -cf "$out.tmp" .
		rm -rf "$root"
		rm -f "$CACHE"/kube-proxy-base-*.tar
		mv "$out.tmp" "$out"
	fi
	echo "$out"
}

# kube_proxy_image: upstream's kube-proxy v1.36.3, unchanged, with
# iptables-wrapper as upstream's image has it, under the
# name and tag kubeadm's DaemonSet pulls (IfNotPresent), for clusters that
# start as kubeadm users' do (up.sh KIP_KUBE_PROXY=upstream); and the
# migration run's load image, localhost/kip-load:lab.
kube_proxy_image() {
	local base
	"$REPO/hack/k8s/build.sh" kube-proxy >/dev/null
	base=$(kube_proxy_base)
	# iptables-wrapper picks nft or legacy by the node's rules on first
	# use, as upstream's image does (the node variant legacy needs it).
	local w=$CLUSTER_DIR/iptables-wrapper links=() c
	for c in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
		links+=(-link "/usr/sbin/$c:iptables-wrapper")
	done
	image kube-proxy "$K8S_BIN/kube-proxy $base $w" -tag "registry.k8s.io/kube-proxy:$K8S_VERSION" \
		-rootfs "$base" -file "$K8S_BIN/kube-proxy:/usr/local/bin/kube-proxy:0755" \
		-file "$w:/usr/sbin/iptables-wrapper:0755" "${links[@]}" \
		-entrypoint /usr/local/bin/kube-proxy
	# The migration run's traffic (conformance/migration/load), static.
	local tmp=$CACHE/.load
	mkdir -p "$tmp"
	(cd "$REPO" && CGO_ENABLED=0 go build -trimpath -o "$tmp/load" ./conformance/migration/load)
	image kip-load "$tmp/load" -tag localhost/kip-load:lab -file "$tmp/load:/load:0755" -entrypoint /load
}

# busybox_root: Debian's busybox-static unpacked; prints the binary's path.
busybox_bin() {
	local dir=$CACHE/busybox deb
	if [[ ! -x $dir/bin/busybox ]]; then
		mkdir -p "$dir"
		(cd "$dir" && apt-get download -qq -o APT::Sandbox::User=root busybox-static) >&2
		deb=$(compgen -G "$dir/busybox-static_*.deb" | head -n1)
		dpkg -x "$deb" "$dir"
	fi
	echo "$dir/bin/busybox"
}

proxy_image() {
	local tmp=$CACHE/.proxy-image version commit args
	mkdir -p "$tmp"
	version=$("$REPO/hack/version.sh" version)
	commit=$("$REPO/hack/version.sh" commit)
	log "go build ./cmd/kube-ipvs-proxy ($version)"
	(cd "$REPO" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $("$REPO/hack/version.sh")" \
		-o "$tmp/kube-ipvs-proxy" ./cmd/kube-ipvs-proxy)
	printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' >"$tmp/passwd"
	printf 'root:x:0:\nnobody:x:65534:\n' >"$tmp/group"
	# One static binary, root, on a distroless-like base (passwd, group, CA
	# certificates, /tmp). It answers at kube-proxy's path too, so that
	# `kubectl set image ds/kube-proxy kube-proxy=<this image>` runs it with
	# kubeadm's command line unchanged.
	args=(-tag "$PROXY_TAG" -file "$tmp/kube-ipvs-proxy:/usr/local/bin/kube-ipvs-proxy:0755"
		-link /usr/local/bin/kube-proxy:kube-ipvs-proxy
		-file "$tmp/passwd:/etc/passwd:0644" -file "$tmp/group:/etc/group:0644"
		-file /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:0644
		-dir /tmp:1777 -entrypoint /usr/local/bin/kube-ipvs-proxy -user 0
		-label org.opencontainers.image.title=kube-ipvs-proxy
		-label "org.opencontainers.image.version=$version"
		-label "org.opencontainers.image.revision=$commit"
		-label "org.opencontainers.image.description=A drop-in replacement for kube-proxy's IPVS mode"
		-label org.opencontainers.image.licenses=Apache-2.0)
	image kube-ipvs-proxy "$tmp/kube-ipvs-proxy $tmp/passwd $tmp/group" "${args[@]}"
	if [[ -n ${KIP_PROXY_PUSH:-} ]]; then
		log "pushing $KIP_PROXY_PUSH"
		"$K8S_BIN/kimg" -push "$KIP_PROXY_PUSH" "${args[@]}" >&2
	fi
}

all_images() {
	local base bb applets=() a
	base=$(debian_base)
	image pause "$K8S_BIN/pause" -tag registry.k8s.io/pause:3.10.2 \
		-file "$K8S_BIN/pause:/pause:0755" -entrypoint /pause -user 65535:65535
	# Upstream's agnhost image carries CoreDNS at /coredns too: the DNS
	# configMap specs run it as their upstream nameserver.
	image agnhost "$K8S_BIN/agnhost $K8S_BIN/coredns $base" \
		-tag registry.k8s.io/e2e-test-images/agnhost:2.63.0 -tag registry.k8s.io/e2e-test-images/agnhost:2.55 \
		-rootfs "$base" -file "$K8S_BIN/agnhost:/agnhost:0755" -link /agnhost-2:agnhost -dir /uploads \
		-file "$K8S_BIN/coredns:/coredns:0755" \
		-file "$K8S_MOD/test/images/agnhost/porter/localhost.crt:/localhost.crt:0644" \
		-file "$K8S_MOD/test/images/agnhost/porter/localhost.key:/localhost.key:0644" \
		-entrypoint /agnhost -cmd pause
	image glibc-dns-testing "$base" -tag registry.k8s.io/e2e-test-images/glibc-dns-testing:2.0.0 \
		-rootfs "$base" -cmd /bin/sh
	# The KubeProxy CLOSE_WAIT spec reads conntrack -L from a host-network
	# pod of upstream's distroless-iptables image; the Debian base has it.
	image distroless-iptables "$base" -tag registry.k8s.io/build-image/distroless-iptables:v0.9.6 \
		-rootfs "$base" -cmd /bin/sh
	bb=$(busybox_bin)
	for a in $("$bb" --list); do
		[[ $a == busybox ]] || applets+=(-link "/bin/$a:busybox")
	done
	image busybox "$bb" -tag registry.k8s.io/e2e-test-images/busybox:1.37.0-1 \
		-file "$bb:/bin/busybox:0755" "${applets[@]}" -dir /tmp:1777 -cmd sh
	# The Conntrack "invalid conntrack state" spec's server: a static
	# binary, so upstream's Debian base adds nothing it uses.
	image regression-issue-74839 "$K8S_BIN/regression-issue-74839" \
		-tag registry.k8s.io/e2e-test-images/regression-issue-74839:1.4 \
		-file "$K8S_BIN/regression-issue-74839:/regression-issue-74839:0755" -entrypoint /regression-issue-74839
	image coredns "$K8S_BIN/coredns" -tag registry.k8s.io/coredns/coredns:v1.15.0 \
		-file "$K8S_BIN/coredns:/coredns:0755" -entrypoint /coredns
	proxy_image
}

case ${1:-all} in
all)
	"$REPO/hack/k8s/build.sh" kimg pause agnhost regression-issue-74839 coredns >/dev/null
	all_images
	;;
proxy)
	"$REPO/hack/k8s/build.sh" kimg >/dev/null
	proxy_image
	read -r ref digest <"$OUT/kube-ipvs-proxy.ref"
	echo "image:   $ref"
	echo "digest:  $digest"
	echo "archive: $OUT/kube-ipvs-proxy.tar"
	echo "version: $("$REPO/hack/version.sh" version)"
	exit 0
	;;
kube-proxy)
	"$REPO/hack/k8s/build.sh" kimg >/dev/null
	kube_proxy_image
	;;
base) debian_base ;;
*) die "usage: images.sh [all|proxy|kube-proxy|base]" ;;
esac
echo "$OUT"
