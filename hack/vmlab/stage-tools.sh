#!/usr/bin/env bash
# hack/vmlab/stage-tools.sh — stage Debian command-line tools, with the
# shared libraries they load, into a directory tree that run.sh copies into
# the VM's initramfs (VMLAB_EXTRA_TREE). Used only by the VM benchmarks, to
# compare our writers with ipvsadm -R and nft -f; the proxy itself never
# runs these binaries.
#
# Usage: hack/vmlab/stage-tools.sh OUTDIR PACKAGE... -- BINARY...
#   e.g. hack/vmlab/stage-tools.sh .cache/vmlab/tools ipvsadm nftables -- /sbin/ipvsadm /usr/sbin/nft
# Packages are downloaded with their library dependencies (cached beside
# OUTDIR), unpacked, and each BINARY (a path inside the packages) is copied
# to OUTDIR/bin with every library ldd resolves, libc included, at the same
# paths the loader expects. A BINARY that is a directory (iptables'
# extensions, /usr/lib/x86_64-linux-gnu/xtables, which it dlopens) is
# copied whole to the same path under OUTDIR, with the libraries of its
# shared objects.
set -euo pipefail

LOG_PREFIX=stage-tools
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh" # log, die, apt_update_once

out=${1:?usage: stage-tools.sh OUTDIR PACKAGE... -- BINARY...}
shift
pkgs=()
while [[ $# -gt 0 && $1 != -- ]]; do pkgs+=("$1"); shift; done
[[ ${1:-} == -- ]] || { log "usage: stage-tools.sh OUTDIR PACKAGE... -- BINARY..."; exit 2; }
shift
bins=("$@")

cache=$(dirname "$out")/tool-debs
root=$cache/root
mkdir -p "$cache" "$root" "$out/bin"

# A fresh machine has no package lists: apt-cache would know nothing.
apt-cache show "${pkgs[0]}" >/dev/null 2>&1 || apt_update_once
# The library closure of the packages, from apt's dependency graph.
closure=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
	--no-breaks --no-replaces --no-enhances "${pkgs[@]}" | grep -v '^ ' | grep -v '<' |
	grep -E "^(lib|$(IFS='|'; echo "${pkgs[*]}"))" | sort -u)
for p in $closure; do
	compgen -G "$cache/${p}_*.deb" >/dev/null ||
		(cd "$cache" && apt-get download -qq -o APT::Sandbox::User=root "$p" >&2)
done
for deb in "$cache"/*.deb; do dpkg -x "$deb" "$root"; done

libpath=$root/lib/x86_64-linux-gnu:$root/usr/lib/x86_64-linux-gnu
# libs_of <file>: copies every library ldd resolves for the file.
libs_of() {
	LD_LIBRARY_PATH=$libpath ldd "$1" | awk '/=>/ { print $3 } /^\t\/lib/ { print $1 }' |
		while read -r lib; do
			[[ -n $lib && -e $lib ]] || die "$b: unresolved library"
			# Keep the loader's path; map staged libraries to /lib/x86_64-linux-gnu.
			case $lib in
			"$root"/*) dst=/lib/x86_64-linux-gnu/$(basename "$lib") ;;
			*) dst=$lib ;;
			esac
			mkdir -p "$out$(dirname "$dst")"
			cp -L "$lib" "$out$dst"
		done
}
for b in "${bins[@]}"; do
	src=$root$b
	if [[ -d $src ]]; then
		mkdir -p "$out$b"
		cp -a "$src/." "$out$b/"
		for so in "$src"/*.so; do libs_of "$so"; done
		continue
	fi
	[[ -x $src ]] || die "$b is not in ${pkgs[*]}"
	cp "$src" "$out/bin/"
	libs_of "$src"
done
echo "$out"
