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
#     (also :<version>)                                definition of the image we ship), the
#                                                      build host's image of its multi-arch index
#
#   hack/cluster/images.sh all           # build what is stale (the proxy for the build
#                                        # host's platform only); print the archive dir
#   hack/cluster/images.sh proxy         # only the proxy's image (`make image`): print its
#                                        # reference, digests, layout, archive and version
#   hack/cluster/images.sh release X.Y.Z # the release's index, binaries, SBOMs, SHA256SUMS
#                                        # in dist/vX.Y.Z (`make release`)
#   hack/cluster/images.sh kube-proxy    # also upstream's kube-proxy v1.36.3 image
#                                        # (registry.k8s.io/kube-proxy:v1.36.3, Debian base
#                                        # with iptables, ipset, conntrack, kmod)
#   hack/cluster/images.sh base          # only the Debian base tarball; print its path
#
# Output: <repo>/.cache/cluster/images/*.tar. Each archive is rebuilt when
# the sha256 of its inputs (binaries, base tarball, this script) changes.
# The Debian base is made with mmdebstrap and cached keyed on its package
# versions. `proxy` builds only the proxy's image (`make image`): an
# index of KIP_PROXY_ARCHES (default amd64 arm64 ppc64le s390x) as an OCI
# layout, .cache/cluster/images/kube-ipvs-proxy.oci, beside the archive of
# the build host's image; KIP_PROXY_IMAGE names it (default
# localhost/kube-ipvs-proxy:lab) and KIP_PROXY_PUSH=REF also pushes the
# index to a registry (docker's credentials).
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

# The proxy's platforms: kube-proxy's. Each image holds the binary built
# for its own GOARCH (CGO_ENABLED=0 cross builds).
read -ra PROXY_ARCHES <<<"${KIP_PROXY_ARCHES:-amd64 arm64 ppc64le s390x}"
# The one pin of the CA certificates the proxy's image carries: Debian
# bookworm's ca-certificates package of this version (apt-get download
# checks it against the signed archive; snapshot.debian.org keeps every
# version once the mirror moves on).
CA_CERTIFICATES_VERSION=20230311+deb12u1

# ca_bundle: Debian's ca-certificates $CA_CERTIFICATES_VERSION made into
# the bundle update-ca-certificates writes with the package's default
# configuration (every certificate it ships, in sorted order, each ending
# in a newline), beside the package's copyright; cached by version; prints
# the directory. Not the build host's bundle, which holds whatever the
# host added.
ca_bundle() {
	local dir=$CACHE/ca-certificates/$CA_CERTIFICATES_VERSION tmp c
	if [[ ! -e $dir/ca-certificates.crt ]]; then
		tmp=$(mktemp -d "$CACHE/.ca.XXXXXX")
		(cd "$tmp" && apt-get download -qq -o APT::Sandbox::User=root "ca-certificates=$CA_CERTIFICATES_VERSION") >&2
		dpkg -x "$tmp"/ca-certificates_*.deb "$tmp/root"
		(cd "$tmp/root/usr/share/ca-certificates" && find . -name '*.crt' | sed 's|^\./||' | LC_ALL=C sort |
			while read -r c; do awk 1 "$c"; done) >"$tmp/ca-certificates.crt"
		cp "$tmp/root/usr/share/doc/ca-certificates/copyright" "$tmp/copyright"
		mkdir -p "$dir"
		mv "$tmp/ca-certificates.crt" "$tmp/copyright" "$dir/"
		rm -rf "$tmp"
	fi
	echo "$dir"
}

# cyclonedx_gomod: CycloneDX's cyclonedx-gomod at the version
# hack/k8s/kimg/tools/go.mod pins (a module of its own, so the proxy's
# go.mod stays clean), built once for this host; prints its path.
cyclonedx_gomod() {
	local tools=$REPO/hack/k8s/kimg/tools key bin
	key=$(cat "$tools/go.mod" "$tools/go.sum" | sha256sum | cut -c1-16)
	bin=$CACHE/tools/cyclonedx-gomod-$key
	if [[ ! -x $bin ]]; then
		mkdir -p "$CACHE/tools"
		(cd "$tools" && env -u GOOS -u GOARCH CGO_ENABLED=0 go build -trimpath -o "$bin.tmp" \
			github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod)
		mv "$bin.tmp" "$bin"
	fi
	echo "$bin"
}

# proxy_image: the proxy's image index, one image per PROXY_ARCHES, into
# $OUT/kube-ipvs-proxy.oci (an OCI image layout, named by the version) and
# the build host's image into $OUT/kube-ipvs-proxy.tar (a docker archive,
# for the lab's `ctr images import`). Reproducible: -trimpath builds
# stamped with the commit's version and time, kimg's sorted layers with
# zero mtimes, the config created at the commit's time, an SBOM without
# serial or timestamp; the same commit gives the same index digest.
proxy_image() {
	local tmp=$CACHE/.proxy-image version commit date arch ca cdx args key inputs=() platforms=() tags
	version=$("$REPO/hack/version.sh" version)
	commit=$("$REPO/hack/version.sh" commit)
	date=$("$REPO/hack/version.sh" date)
	ca=$(ca_bundle)
	cdx=$(cyclonedx_gomod)
	rm -rf "$tmp"
	for arch in "${PROXY_ARCHES[@]}"; do
		log "go build ./cmd/kube-ipvs-proxy ($version, linux/$arch) and its SBOM"
		mkdir -p "$tmp/$arch"
		(cd "$REPO" && CGO_ENABLED=0 GOOS=linux GOARCH=$arch nice -n 10 go build -trimpath \
			-ldflags "-s -w $("$REPO/hack/version.sh")" -o "$tmp/$arch/kube-ipvs-proxy" ./cmd/kube-ipvs-proxy)
		GOOS=linux GOARCH=$arch "$cdx" bin -json -noserial -notimestamp -version "$version" \
			-output "$tmp/$arch/sbom.cdx.json" "$tmp/$arch/kube-ipvs-proxy" 2>/dev/null
		inputs+=("$tmp/$arch/kube-ipvs-proxy" "$tmp/$arch/sbom.cdx.json")
		platforms+=(-platform "linux/$arch")
	done
	printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' >"$tmp/passwd"
	printf 'root:x:0:\nnobody:x:65534:\n' >"$tmp/group"
	# The archive also carries the version's tag, beside PROXY_TAG's.
	tags=(-tag "$PROXY_TAG")
	[[ ${PROXY_TAG##*/} == *:* ]] && tags+=(-tag "${PROXY_TAG%:*}:$version")
	# One static binary, root, on a distroless-like base (passwd, group, CA
	# certificates, /tmp), with its SBOM and licence. It answers at
	# kube-proxy's path too, so that `kubectl set image ds/kube-proxy
	# kube-proxy=<this image>` runs it with kubeadm's command line unchanged.
	args=("${tags[@]}" "${platforms[@]}" -created "$date"
		-file "$tmp/{arch}/kube-ipvs-proxy:/usr/local/bin/kube-ipvs-proxy:0755"
		-link /usr/local/bin/kube-proxy:kube-ipvs-proxy
		-file "$tmp/{arch}/sbom.cdx.json:/usr/share/doc/kube-ipvs-proxy/sbom.cdx.json:0644"
		-file "$REPO/LICENSE:/usr/share/doc/kube-ipvs-proxy/LICENSE:0644"
		-file "$tmp/passwd:/etc/passwd:0644" -file "$tmp/group:/etc/group:0644"
		-file "$ca/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:0644"
		-file "$ca/copyright:/usr/share/doc/ca-certificates/copyright:0644"
		-dir /tmp:1777 -entrypoint /usr/local/bin/kube-ipvs-proxy -user 0
		-label org.opencontainers.image.title=kube-ipvs-proxy
		-label "org.opencontainers.image.version=$version"
		-label "org.opencontainers.image.revision=$commit"
		-label "org.opencontainers.image.created=$date"
		-label "org.opencontainers.image.description=A drop-in replacement for kube-proxy's IPVS mode"
		-label org.opencontainers.image.licenses=Apache-2.0)
	# kimg prints the index's "<first tag> <digest>", then "<platform>
	# <digest>" per image: the first line is kept in .ref, all in .digests.
	key=$({ sha256sum "${inputs[@]}" "$REPO/LICENSE" "$ca/ca-certificates.crt" "$K8S_BIN/kimg" "${BASH_SOURCE[0]}" |
		cut -c1-64; echo "${args[*]}"; } | sha256sum | cut -c1-16)
	if [[ ! -e $OUT/kube-ipvs-proxy.tar || ! -e $OUT/kube-ipvs-proxy.oci/index.json ||
		$(cat "$OUT/kube-ipvs-proxy.key" 2>/dev/null) != "$key" ]]; then
		log "image kube-ipvs-proxy (${PROXY_ARCHES[*]})"
		"$K8S_BIN/kimg" "${args[@]}" -out "$OUT/kube-ipvs-proxy.tar" -layout "$OUT/kube-ipvs-proxy.oci" \
			-layout-ref "$version" >"$OUT/kube-ipvs-proxy.digests"
		head -n1 "$OUT/kube-ipvs-proxy.digests" >"$OUT/kube-ipvs-proxy.ref"
		echo "$key" >"$OUT/kube-ipvs-proxy.key"
	fi
	if [[ -n ${KIP_PROXY_PUSH:-} ]]; then
		log "pushing $KIP_PROXY_PUSH"
		"$K8S_BIN/kimg" -push "$KIP_PROXY_PUSH" "${args[@]}" >&2
	fi
}

# release X.Y.Z: the proxy's image index for the release commit of
# X.Y.Z, as an OCI image layout in $REPO/dist/vX.Y.Z/kube-ipvs-proxy.oci
# (named vX.Y.Z: `skopeo copy oci:DIR:vX.Y.Z docker://...`, `crane push
# DIR ...`), with each platform's binary and SBOM beside it and SHA256SUMS
# of every file; checked by kimg's TestShippedLayout. Refused unless
# VERSION says X.Y.Z, this is its release commit with a clean tree, and
# CHANGELOG.md has its section.
release() {
	local want=$1 version dist arch
	[[ $want =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "usage: make release VERSION=X.Y.Z (got \"$want\")"
	[[ $(tr -d ' \t\n' <"$REPO/VERSION") == "$want" ]] ||
		die "VERSION holds $(cat "$REPO/VERSION"), not $want: commit the bump (and CHANGELOG.md's [$want] section) first"
	version=$("$REPO/hack/version.sh" version)
	[[ $version == "v$want" ]] ||
		die "this tree is $version, not v$want: release from the commit that set VERSION to $want, with a clean work tree"
	grep -q "^## \[$want\]" "$REPO/CHANGELOG.md" || die "CHANGELOG.md has no [$want] section"
	PROXY_TAG=kube-ipvs-proxy:$version
	proxy_image
	dist=$REPO/dist/$version
	rm -rf "$dist"
	mkdir -p "$dist"
	cp -r "$OUT/kube-ipvs-proxy.oci" "$dist/kube-ipvs-proxy.oci"
	for arch in "${PROXY_ARCHES[@]}"; do
		cp "$CACHE/.proxy-image/$arch/kube-ipvs-proxy" "$dist/kube-ipvs-proxy-linux-$arch"
		cp "$CACHE/.proxy-image/$arch/sbom.cdx.json" "$dist/kube-ipvs-proxy-linux-$arch.cdx.json"
	done
	(cd "$dist" && find . -type f | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum >"$CACHE/.SHA256SUMS")
	mv "$CACHE/.SHA256SUMS" "$dist/SHA256SUMS"
	(cd "$REPO/hack/k8s/kimg" && KIMG_LAYOUT=$dist/kube-ipvs-proxy.oci go test -count=1 -run '^TestShippedLayout$' . >&2)
	echo "release: $dist"
	echo "index:   $(head -n1 "$OUT/kube-ipvs-proxy.digests" | cut -d' ' -f2) (${PROXY_ARCHES[*]})"
	echo "push:    skopeo copy --all oci:$dist/kube-ipvs-proxy.oci:$version docker://REGISTRY/kube-ipvs-proxy:$version"
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
	# The lab runs the build host's image only: the other platforms would
	# cost every cluster start (make test's included) a cross build each.
	[[ -n ${KIP_PROXY_ARCHES:-} ]] || PROXY_ARCHES=("$(go env GOARCH)")
	"$REPO/hack/k8s/build.sh" kimg pause agnhost regression-issue-74839 coredns >/dev/null
	all_images
	;;
proxy)
	"$REPO/hack/k8s/build.sh" kimg >/dev/null
	proxy_image
	read -r ref digest <"$OUT/kube-ipvs-proxy.ref"
	echo "image:   $ref"
	echo "digest:  $digest (the index: ${PROXY_ARCHES[*]})"
	tail -n +2 "$OUT/kube-ipvs-proxy.digests" | sed 's/^/         /'
	echo "layout:  $OUT/kube-ipvs-proxy.oci"
	echo "archive: $OUT/kube-ipvs-proxy.tar (linux/$(go env GOARCH))"
	echo "version: $("$REPO/hack/version.sh" version)"
	exit 0
	;;
release)
	"$REPO/hack/k8s/build.sh" kimg >/dev/null
	release "${2:-}"
	exit 0
	;;
kube-proxy)
	"$REPO/hack/k8s/build.sh" kimg >/dev/null
	kube_proxy_image
	;;
base) debian_base ;;
*) die "usage: images.sh [all|proxy|kube-proxy|base|release X.Y.Z]" ;;
esac
echo "$OUT"
