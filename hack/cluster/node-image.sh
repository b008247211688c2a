#!/usr/bin/env bash
# Builds the lab cluster's node disk image: Debian bookworm (mmdebstrap) with
# Debian's containerd, runc, CNI plugins, iptables, nftables, kmod,
# iproute2, conntrack, ipvsadm, systemd and the cloud kernel (its full
# module tree, and the initramfs Debian generates for it), as a raw ext4
# image made with mkfs.ext4 -d. The kubelet, certificates and container
# images are not in it: they come on each node's config disk (see
# hack/cluster/README.md), so the base only changes when its inputs do.
#
#   hack/cluster/node-image.sh        # build if missing; print the image dir
#
# Output: <repo>/.cache/cluster/node-<key>/{root.img,vmlinuz,initrd.img,versions}
# where <key> hashes this script, the node files under hack/cluster/node/
# and the apt candidate versions of every package it installs (a Debian
# point release or security update gives a new image). Older node-* dirs
# are removed. Needs root (mmdebstrap in root mode, mkfs.ext4 -d).
set -euo pipefail
shopt -s inherit_errexit

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE=${KIP_CLUSTER_CACHE:-$REPO/.cache/cluster}
KERNEL_META=${KIP_KERNEL_META:-linux-image-cloud-amd64}
IMAGE_SIZE=${KIP_NODE_IMAGE_SIZE:-6G}
MIRROR=${KIP_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY=${KIP_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}

PACKAGES=(systemd-sysv udev dbus kmod iproute2 iptables nftables conntrack ipvsadm
	containerd runc containernetworking-plugins ca-certificates curl jq procps
	iputils-ping netcat-openbsd e2fsprogs socat ethtool less)

LOG_PREFIX=cluster/node-image.sh
# shellcheck source=hack/lib.sh
. "$REPO/hack/lib.sh" # log, die

[[ $(id -u) == 0 ]] || die "needs root (mmdebstrap, mkfs.ext4 -d)"
for t in mmdebstrap mkfs.ext4 apt-cache; do
	command -v "$t" >/dev/null || die "$t not found (apt-get install mmdebstrap e2fsprogs)"
done

# The kernel package the meta package points at, as hack/vmlab/run.sh does.
kernel_pkg=$(apt-cache depends "$KERNEL_META" 2>/dev/null | awk '/Depends: linux-image-/ { print $2; exit }')
[[ -n $kernel_pkg ]] || die "cannot resolve a kernel from apt-cache depends $KERNEL_META (apt-get update?)"

versions() {
	local p v
	for p in "${PACKAGES[@]}" "$kernel_pkg"; do
		v=$(apt-cache policy "$p" | awk '/Candidate:/ { print $2; exit }')
		[[ -n $v && $v != "(none)" ]] || die "no apt candidate for $p (apt-get update?)"
		echo "$p $v"
	done
}
vers=$(versions)
key=$({
	cat "$0"
	find "$HERE/node" -type f -print0 | LC_ALL=C sort -z | xargs -0 cat
	echo "$vers" "$IMAGE_SIZE"
} | sha256sum | cut -c1-16)
out=$CACHE/node-$key
if [[ -e $out/.done ]]; then
	echo "$out"
	exit 0
fi

mkdir -p "$CACHE"
exec 9>"$CACHE/.node-image.lock"
flock 9
[[ -e $out/.done ]] && { echo "$out"; exit 0; }

start=$(date +%s)
work=$(mktemp -d "$CACHE/.node-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/root
log "mmdebstrap bookworm with ${#PACKAGES[@]} packages and $kernel_pkg (a few minutes)"
include=$(IFS=,; echo "${PACKAGES[*]},$kernel_pkg")
nice -n 10 mmdebstrap --mode=root --variant=minbase --include="$include" \
	--aptopt='Acquire::Retries "3"' \
	--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' \
	bookworm "$root" \
	"deb $MIRROR bookworm main" "deb $MIRROR bookworm-updates main" \
	"deb $SECURITY bookworm-security main" >&2

# Our files: systemd units and scripts that read the config disk at boot.
cp -a "$HERE/node/." "$root/"
chmod 0755 "$root"/usr/local/sbin/kip-*
chroot "$root" systemctl enable kip-setup.service kip-images.service kip-images-late.service kip-cni.service kubelet.service >&2
# Nothing here needs them, and under TCG every unit costs seconds.
chroot "$root" systemctl mask apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer \
	fstrim.timer systemd-timesyncd.service getty@tty1.service >&2 || true
echo kip-node >"$root/etc/hostname"
rm -f "$root/etc/machine-id" && : >"$root/etc/machine-id"
printf '/dev/vda / ext4 defaults,noatime 0 1\n' >"$root/etc/fstab"
printf 'root:kip\n' | chroot "$root" chpasswd

mkdir -p "$work/out"
cp "$root"/boot/vmlinuz-* "$work/out/vmlinuz"
cp "$root"/boot/initrd.img-* "$work/out/initrd.img"
echo "$vers" >"$work/out/versions"
log "mkfs.ext4 -d ($IMAGE_SIZE sparse)"
truncate -s "$IMAGE_SIZE" "$work/out/root.img"
mkfs.ext4 -q -L kiproot -d "$root" "$work/out/root.img"
touch "$work/out/.done"
rm -rf "$CACHE"/node-*/
mv "$work/out" "$out"
log "built $out in $(($(date +%s) - start))s"
echo "$out"
