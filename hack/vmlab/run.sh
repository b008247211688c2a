#!/usr/bin/env bash
# hack/vmlab/run.sh — run Go integration tests inside a throwaway qemu VM
# that boots Debian's cloud kernel (the host kernel has no IPVS).
#
# Usage: hack/vmlab/run.sh <go package patterns, space separated> [-- <test binary args>]
#   e.g. hack/vmlab/run.sh ./integration/traffic/ -- -test.v -test.run TestNodePort
#
# Steps: install host packages if missing -> fetch and unpack the kernel .deb
# (cached) -> build the cached base initramfs (busybox, kernel modules, /init)
# -> build static test binaries (`go test -c -tags integration`) into a small
# per-run initramfs -> boot qemu (TCG) -> stream the serial console to stdout
# and a log -> exit with the tests' exit code read from the console marker.
#
# Environment:
#   VMLAB_CACHE        cache dir            (default <repo>/.cache/vmlab)
#   VMLAB_TIMEOUT      VM wall-clock limit  (seconds, default 600)
#   VMLAB_MEM          VM memory in MiB     (default 1024)
#   VMLAB_SMP          VM vCPUs             (default 2)
#   VMLAB_KERNEL       Debian release whose cloud kernel boots: bookworm (default: Debian 12,
#                      6.1, from the host's apt sources), bullseye (Debian 11, 5.10) or trixie
#                      (Debian 13, 6.12). bullseye and trixie are read from Debian's archive
#                      through an apt configuration of the lab's own under
#                      $VMLAB_CACHE/apt-<release>; the host's apt sources are not touched.
#                      `make integration KERNEL=bullseye` sets it.
#   VMLAB_ARCH         amd64 (default) or arm64: the kernel's, busybox's and the test
#                      binaries' architecture. arm64 boots Debian's arm64 cloud kernel
#                      under qemu-system-aarch64 (-M virt -cpu max, TCG, console ttyAMA0),
#                      with busybox-static:arm64; their packages come through an apt
#                      configuration of the lab's own (the host's dpkg is not touched).
#                      `make integration ARCH=arm64` sets it.
#   VMLAB_KERNEL_META  apt meta package naming the kernel (default linux-image-cloud-$VMLAB_ARCH)
#   VMLAB_EXTRA_FILES  space-separated "src[:dst]" host files to put into the
#                      initramfs (dst defaults to /bin/<basename>); they must be
#                      static or bring their own libraries.
#   VMLAB_EXTRA_TREE   a directory copied over the initramfs root (e.g. tools staged
#                      with their libraries by hack/vmlab/stage-tools.sh).
#   VMLAB_ENV          space-separated NAME=value pairs exported to the tests in the VM.
#   VMLAB_LOG          console log path     (default $VMLAB_CACHE/console.log)
#   VMLAB_NET          "none" (default): no network device; "user": one
#                      virtio-net NIC on qemu user networking (guest 10.0.2.15/24,
#                      gateway 10.0.2.2, which reaches the host's 127.0.0.1).
#                      The guest configures it itself: the virtio modules are
#                      put in /vmlab/netmods/ and their load order in
#                      /vmlab/netmods/order.
set -euo pipefail
shopt -s inherit_errexit

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE=${VMLAB_CACHE:-$REPO/.cache/vmlab}
TIMEOUT=${VMLAB_TIMEOUT:-600}
MEM=${VMLAB_MEM:-1024}
SMP=${VMLAB_SMP:-2}
KERNEL_RELEASE=${VMLAB_KERNEL:-bookworm}
ARCH=${VMLAB_ARCH:-amd64}
KERNEL_META=${VMLAB_KERNEL_META:-linux-image-cloud-$ARCH}
EXTRA_FILES=${VMLAB_EXTRA_FILES:-}
EXTRA_TREE=${VMLAB_EXTRA_TREE:-}
VM_ENV=${VMLAB_ENV:-}
LOG=${VMLAB_LOG:-$CACHE/console.log}
NET=${VMLAB_NET:-none}
MARKER=VMLAB-RESULT

# The VM per architecture: qemu's package and binary, its machine
# arguments, and the serial console.
case $ARCH in
amd64)
	QEMU_PACKAGE=qemu-system-x86 QEMU=qemu-system-x86_64 CONSOLE=ttyS0
	QEMU_MACHINE=(-accel "tcg,thread=multi" -cpu max)
	;;
arm64)
	QEMU_PACKAGE=qemu-system-arm QEMU=qemu-system-aarch64 CONSOLE=ttyAMA0
	QEMU_MACHINE=(-M virt -accel "tcg,thread=multi" -cpu max)
	;;
*)
	echo "vmlab: VMLAB_ARCH=$ARCH: want amd64 or arm64" >&2
	exit 2
	;;
esac
HOST_PACKAGES=("$QEMU_PACKAGE" busybox-static kmod cpio)
# Kernel module trees copied into the VM (relative to lib/modules/<ver>/kernel).
MODULE_TREES=(net drivers/net lib crypto)
# The virtio-net stack for VMLAB_NET=user, in load order.
NET_MODULES=(virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci
	failover net_failover virtio_net)
# Modules /init loads; names that the kernel lacks are reported, not fatal.
# Every nft_* module of the kernel is appended in base_modules_list.
BOOT_MODULES=(ip_vs ip_vs_rr ip_vs_wrr ip_vs_wlc ip_vs_sh ip_vs_mh
	nfnetlink nf_conntrack nf_nat nf_tables nf_conntrack_netlink veth dummy)
# Modules the proxy must not need, left out of the initramfs: opening their
# netlink family fails in the lab as on a node that cannot load them (a
# minimal image, a hardened module policy), so a dependency on one is
# caught (integration/ipvswriter TestDataPlaneOpensOnlyTheNetlinkFamiliesItUses).
ABSENT_MODULES=(xfrm_user af_key)

export PATH="$PATH:/usr/local/go/bin"
LOG_PREFIX=vmlab
# shellcheck source=hack/lib.sh
. "$REPO/hack/lib.sh" # log, die, apt_install, apt_update_once
KAPT=()         # apt options for the kernel's release; empty: the host's apt
KAPT_UPDATED=
WORK= # per-run scratch dir under $CACHE, removed on exit

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1fs", b - a }'; }

usage() {
	sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}

# --- host packages --------------------------------------------------------

ensure_packages() { apt_install "${HOST_PACKAGES[@]}"; }

# --- kernel ---------------------------------------------------------------

# kernel_apt_setup points KAPT at the kernel release's archive: nothing for
# bookworm (the host's), an apt configuration of the lab's own otherwise.
# Another architecture than the host's always takes the lab's own
# configuration, for that architecture alone.
kernel_apt_setup() {
	case $KERNEL_RELEASE in
	bookworm) [[ $ARCH == amd64 ]] && return 0 ;;
	bullseye | trixie) ;;
	*) die "VMLAB_KERNEL=$KERNEL_RELEASE: want bullseye, bookworm or trixie" ;;
	esac
	local dir=$CACHE/apt-$KERNEL_RELEASE key=/usr/share/keyrings/debian-archive-keyring.gpg
	[[ $ARCH == amd64 ]] || dir+=-$ARCH
	mkdir -p "$dir"/{lists/partial,cache/archives/partial,parts}
	cat >"$dir/sources.list" <<-EOF
		deb [signed-by=$key arch=$ARCH] http://deb.debian.org/debian $KERNEL_RELEASE main
		deb [signed-by=$key arch=$ARCH] http://deb.debian.org/debian-security $KERNEL_RELEASE-security main
	EOF
	KAPT=(-o "Dir::Etc::SourceList=$dir/sources.list" -o "Dir::Etc::SourceParts=$dir/parts"
		-o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache"
		-o "APT::Architecture=$ARCH" -o "APT::Architectures::=$ARCH")
}

# guest_busybox prints the path of a static busybox for the guest: the
# host's for amd64, else busybox-static of the guest's architecture from
# the kernel's release, unpacked once.
guest_busybox() {
	[[ $ARCH == amd64 ]] && { echo /bin/busybox; return; }
	local ver dir deb
	ver=$(apt-cache "${KAPT[@]}" policy busybox-static 2>/dev/null | awk '/Candidate:/ { print $2; exit }') || true
	if [[ -z $ver || $ver == "(none)" ]]; then
		kernel_apt_update_once
		ver=$(apt-cache "${KAPT[@]}" policy busybox-static | awk '/Candidate:/ { print $2; exit }')
	fi
	dir=$CACHE/busybox-$ARCH-${ver//:/%3a}
	if [[ ! -x $dir/bin/busybox ]]; then
		log "apt-get download busybox-static=$ver ($ARCH)"
		rm -rf "$dir" "$dir.tmp"
		mkdir -p "$dir.tmp"
		(cd "$dir.tmp" && apt-get "${KAPT[@]}" download -qq -o APT::Sandbox::User=root "busybox-static=$ver") >&2
		deb=$(compgen -G "$dir.tmp/busybox-static_*.deb" | head -n1)
		dpkg -x "$deb" "$dir.tmp"
		mv "$dir.tmp" "$dir"
	fi
	echo "$dir/bin/busybox"
}

kernel_apt_update_once() {
	[[ ${#KAPT[@]} -eq 0 ]] && { apt_update_once; return; }
	[[ -n $KAPT_UPDATED ]] && return 0
	log "apt-get update ($KERNEL_RELEASE's archive)"
	apt-get "${KAPT[@]}" -o APT::Sandbox::User=root update -qq >&2
	KAPT_UPDATED=1
}

# Prints "<package>_<version>" of the kernel the meta package depends on,
# e.g. linux-image-6.1.0-56-cloud-amd64_6.1.192-2.
kernel_package() {
	local pkg ver
	# A release's lists may not be there yet: apt-cache then fails.
	pkg=$(apt-cache "${KAPT[@]}" depends "$KERNEL_META" 2>/dev/null | awk '/Depends: linux-image-/ { print $2; exit }') || true
	if [[ -z $pkg ]]; then
		kernel_apt_update_once
		pkg=$(apt-cache "${KAPT[@]}" depends "$KERNEL_META" | awk '/Depends: linux-image-/ { print $2; exit }')
	fi
	[[ -n $pkg ]] || die "cannot resolve a kernel from apt-cache depends $KERNEL_META ($KERNEL_RELEASE)"
	ver=$(apt-cache "${KAPT[@]}" policy "$pkg" | awk '/Candidate:/ { print $2; exit }')
	[[ -n $ver && $ver != "(none)" ]] || die "no candidate version for $pkg"
	echo "${pkg}_$ver"
}

download_deb() { # download_deb <package>_<version>; prints the .deb path
	local dir=$CACHE/debs spec="${1%%_*}=${1#*_}"
	mkdir -p "$dir"
	if ! compgen -G "$dir/${1}_*.deb" >/dev/null; then
		log "apt-get download $spec"
		# apt's _apt sandbox user cannot write into root's cache; fetching unsandboxed is fine here.
		(cd "$dir" && apt-get "${KAPT[@]}" download -qq -o APT::Sandbox::User=root "$spec") >&2 ||
			{ kernel_apt_update_once && (cd "$dir" && apt-get "${KAPT[@]}" download -qq -o APT::Sandbox::User=root "$spec") >&2; }
	fi
	compgen -G "$dir/${1}_*.deb" | head -n1
}

# kernel_series is a kernel package's major.minor and flavour
# (linux-image-6.1.0-56-cloud-amd64_… → 6.1-cloud-amd64): another
# architecture's kernel of the same series is another series.
kernel_series() { basename "$1" | sed -E 's/^linux-image-([0-9]+\.[0-9]+)[^-]*(-[0-9]+)?-([^_]*).*/\1-\3/'; }

# Drops cached .debs and trees of kernels of $1's series other than $1 (apt
# moved on); other series (VMLAB_KERNEL's other releases) stay.
prune_other_kernels() {
	local f series
	series=$(kernel_series "$1")
	for f in "$CACHE"/kernel/* "$CACHE"/debs/*.deb; do
		[[ -e $f && $(basename "$f") != "$1" && $(basename "$f") != "$1"_* ]] || continue
		[[ $(kernel_series "$f") == "$series" ]] && rm -rf "$f"
	done
	return 0
}

# Unpacks the kernel package once into $CACHE/kernel/<package>_<version>;
# prints that dir.
prepare_kernel() {
	local pkg=$1 dir=$CACHE/kernel/$1 deb
	if [[ ! -e $dir/.done ]]; then
		prune_other_kernels "$pkg"
		deb=$(download_deb "$pkg")
		log "dpkg -x $(basename "$deb")"
		rm -rf "$dir" "$dir.tmp"
		mkdir -p "$dir.tmp"
		dpkg -x "$deb" "$dir.tmp"
		touch "$dir.tmp/.done"
		mv "$dir.tmp" "$dir"
	fi
	echo "$dir"
}

# Prints the module directory (…/lib/modules/<ver>) of an unpacked kernel.
modules_dir() {
	local d
	for d in "$1"/lib/modules/* "$1"/usr/lib/modules/*; do
		[[ -d $d/kernel ]] && { echo "$d"; return; }
	done
	die "no lib/modules/<ver>/kernel in $1"
}

# --- initramfs ------------------------------------------------------------

cpio_gz() { # cpio_gz <dir> <out> [gzip level]
	(cd "$1" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --owner=0:0 --quiet) | gzip "-${3:-6}" >"$2.$$"
	mv "$2.$$" "$2"
}

base_modules_list() { # base_modules_list <modules dir>
	printf '%s\n' "${BOOT_MODULES[@]}"
	find "$1/kernel" -name 'nft_*.ko*' -printf '%f\n' | sed 's/\.ko.*$//' | sort -u
}

write_init() {
	cat >"$1" <<'EOF'
#!/bin/sh
# vmlab /init: mount, load modules, run the test binaries, report, power off.
export PATH=/bin HOME=/tmp TMPDIR=/tmp
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /tmp /run /var/run
echo "vmlab: init started at $(cut -d' ' -f1 /proc/uptime)s"
loaded= missing=
for m in $(cat /vmlab/modules); do
	if modprobe "$m" 2>/dev/null; then loaded="$loaded $m"; else missing="$missing $m"; fi
done
echo "vmlab: kernel $(uname -r), $(nproc) cpus, modules done at $(cut -d' ' -f1 /proc/uptime)s"
echo "vmlab: modules loaded:$loaded"
[ -n "$missing" ] && echo "vmlab: modules not available:$missing"
export KIP_VMLAB=1
[ -s /vmlab/env ] && . /vmlab/env && echo "vmlab: env:" $(sed 's/^export //' /vmlab/env)
[ -s /vmlab/extra ] && echo "vmlab: extra files:" $(ls -d $(cat /vmlab/extra))
set --
[ -f /vmlab/args ] && . /vmlab/args
rc=0
for t in $(cat /vmlab/tests); do
	echo "vmlab: running $t $*"
	(cd "/tests/$t" && "./$t.test" "$@") || rc=$?
done
echo "VMLAB-RESULT: exit=$rc"
sync
poweroff -f
EOF
	chmod 0755 "$1"
}

# Builds (once per kernel/busybox/init content) the base initramfs: busybox,
# the kernel's module trees with depmod data, and /init. Prints its path.
build_base_initramfs() {
	local kdir=$1 mdir ver root key out busybox
	mdir=$(modules_dir "$kdir")
	ver=$(basename "$mdir")
	busybox=$(guest_busybox)
	key=$({
		basename "$kdir"
		[[ $ARCH == amd64 ]] || echo "$busybox"
		dpkg-query -W -f='${Version}' busybox-static
		declare -f write_init base_modules_list
		printf '%s\n' "${MODULE_TREES[@]}" "${BOOT_MODULES[@]}" absent: "${ABSENT_MODULES[@]}"
	} | sha256sum | cut -c1-16)
	out=$CACHE/base-$ver-$key.cpio.gz
	if [[ ! -e $out ]]; then
		log "building base initramfs for $ver"
		root=$WORK/base-root
		mkdir -p "$root"/{bin,sbin,proc,sys,dev,tmp,run,etc,vmlab,tests}
		install -m 0755 "$busybox" "$root/bin/busybox"
		local a
		# The host's busybox lists the applets: the guest's may not run here.
		for a in $(/bin/busybox --list); do
			[[ $a == busybox ]] || ln -sf busybox "$root/bin/$a"
		done
		ln -sf ../bin/modprobe "$root/sbin/modprobe" # moby/ipvs execs modprobe
		local dst=$root/lib/modules/$ver t
		mkdir -p "$dst/kernel"
		for t in "${MODULE_TREES[@]}"; do
			[[ -d $mdir/kernel/$t ]] || continue
			mkdir -p "$dst/kernel/$(dirname "$t")"
			cp -a "$mdir/kernel/$t" "$dst/kernel/$t"
		done
		for t in "${ABSENT_MODULES[@]}"; do
			find "$dst/kernel" -name "$t.ko*" -delete
		done
		cp -a "$mdir"/modules.{order,builtin,builtin.modinfo} "$dst/" 2>/dev/null || true
		depmod -b "$root" "$ver" >&2
		base_modules_list "$mdir" >"$root/vmlab/modules"
		write_init "$root/init"
		rm -f "$CACHE"/base-"$ver"-*.cpio.gz
		cpio_gz "$root" "$out"
		rm -rf "$root"
	fi
	echo "$out"
}

# Quotes words for busybox sh (single quotes only).
sh_quote() {
	local w quoted=()
	for w in "$@"; do quoted+=("'${w//\'/\'\\\'\'}'"); done
	echo "${quoted[*]}"
}

# Builds the static test binaries for the package pattern plus args, env and
# extra files into a per-run initramfs. Prints its path.
build_run_initramfs() {
	local pattern=$1; shift
	local root=$WORK/run-root out=$WORK/run.cpio.gz name dir ipath
	mkdir -p "$root/vmlab" "$root/tests"
	: >"$root/vmlab/tests"
	while read -r ipath dir; do
		name=$(basename "$ipath")
		[[ -e $root/tests/$name ]] && name=$(echo "${ipath#*/*/*/}" | tr / _)
		log "go test -c -tags integration $ipath"
		mkdir -p "$root/tests/$name"
		(cd "$REPO" && CGO_ENABLED=0 GOARCH=$ARCH go test -c -tags integration -o "$root/tests/$name/$name.test" "$ipath") >&2
		[[ -d $dir/testdata ]] && cp -a "$dir/testdata" "$root/tests/$name/"
		echo "$name" >>"$root/vmlab/tests"
	done < <(cd "$REPO" && read -ra patterns <<<"$pattern" &&
		go list -tags integration -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' "${patterns[@]}")
	[[ -s $root/vmlab/tests ]] || die "no test packages match $pattern"
	echo "set -- $(sh_quote "$@")" >"$root/vmlab/args"
	local kv
	: >"$root/vmlab/env"
	for kv in $VM_ENV; do
		[[ $kv == *=* ]] || die "VMLAB_ENV entry $kv is not NAME=value"
		echo "export ${kv%%=*}=$(sh_quote "${kv#*=}")" >>"$root/vmlab/env"
	done
	local spec src dst
	for spec in $EXTRA_FILES; do
		src=${spec%%:*}
		dst=${spec#*:}
		[[ $spec == *:* ]] || dst=/bin/$(basename "$src")
		[[ -e $src ]] || die "VMLAB_EXTRA_FILES: $src does not exist"
		mkdir -p "$root$(dirname "$dst")"
		cp -a "$src" "$root$dst"
		echo "$dst" >>"$root/vmlab/extra"
	done
	if [[ -n $EXTRA_TREE ]]; then
		[[ -d $EXTRA_TREE ]] || die "VMLAB_EXTRA_TREE: $EXTRA_TREE is not a directory"
		cp -a "$EXTRA_TREE/." "$root/"
	fi
	cpio_gz "$root" "$out" 1
	echo "$out"
}

# Copies NET_MODULES of the kernel into the run root's /vmlab/netmods/,
# with their load order, for VMLAB_NET=user.
stage_net_modules() {
	local mdir dst=$WORK/run-root/vmlab/netmods m f
	mdir=$(modules_dir "$1")
	mkdir -p "$dst"
	: >"$dst/order"
	for m in "${NET_MODULES[@]}"; do
		f=$(find "$mdir/kernel" -name "$m.ko*" | head -n1)
		[[ -n $f ]] || { log "VMLAB_NET=user: kernel has no $m module (built in?)"; continue; }
		cp "$f" "$dst/"
		basename "$f" >>"$dst/order"
	done
}

# --- VM -------------------------------------------------------------------

# Boots the VM with the serial console on stdout (and $LOG); returns the
# tests' exit code from the marker line, or 1 when it is missing.
boot() {
	local kdir=$1 initrd=$2 vmlinuz st rc nic=(-nic none)
	[[ $NET == user ]] && nic=(-nic "user,model=virtio-net-pci") # one qemu argument
	vmlinuz=$(compgen -G "$kdir/boot/vmlinuz-*" | head -n1)
	[[ -n $vmlinuz ]] || die "no boot/vmlinuz-* in $kdir"
	mkdir -p "$(dirname "$LOG")"
	log "booting $(basename "$vmlinuz") (timeout ${TIMEOUT}s, console log $LOG)"
	set +e
	timeout -k 10 "$TIMEOUT" "$QEMU" \
		"${QEMU_MACHINE[@]}" -m "$MEM" -smp "$SMP" \
		-kernel "$vmlinuz" -initrd "$initrd" \
		-append "console=$CONSOLE quiet panic=-1" \
		-nographic -no-reboot "${nic[@]}" </dev/null 2>&1 | tee "$LOG"
	st=("${PIPESTATUS[@]}")
	set -e
	if [[ ${st[0]} -eq 124 || ${st[0]} -eq 137 ]]; then
		log "FAIL: VM timed out after ${TIMEOUT}s"
		return 1
	fi
	rc=$(tr -d '\r' <"$LOG" | sed -n "s/^$MARKER: exit=\([0-9][0-9]*\)\$/\1/p" | tail -n1)
	if [[ -z $rc ]]; then
		log "FAIL: no '$MARKER' line on the console (qemu exit ${st[0]})"
		return 1
	fi
	if [[ ${st[0]} -ne 0 ]]; then
		log "FAIL: qemu exited ${st[0]}"
		return 1
	fi
	return "$rc"
}

main() {
	[[ $# -ge 1 && $1 != -h && $1 != --help ]] || usage
	local pattern=$1; shift
	if [[ $# -gt 0 ]]; then
		[[ $1 == -- ]] || usage
		shift
	fi
	local t0 t kpkg kdir base run rc=0
	t0=$(now)
	mkdir -p "$CACHE"
	WORK=$(mktemp -d "$CACHE/run.XXXXXX")
	trap 'rm -rf "$WORK"' EXIT
	t=$(now); ensure_packages; log "host packages ready ($(elapsed "$t"))"
	t=$(now)
	kernel_apt_setup
	kpkg=$(kernel_package)
	kdir=$(prepare_kernel "$kpkg")
	base=$(build_base_initramfs "$kdir")
	log "kernel $kpkg ready ($(elapsed "$t"))"
	case $NET in
	none) ;;
	user) stage_net_modules "$kdir" ;;
	*) die "VMLAB_NET=$NET: want none or user" ;;
	esac
	t=$(now); run=$(build_run_initramfs "$pattern" "$@"); log "test binaries built ($(elapsed "$t"))"
	# The kernel unpacks concatenated (compressed) cpio archives in order.
	cat "$base" "$run" >"$WORK/initrd.gz"
	t=$(now)
	boot "$kdir" "$WORK/initrd.gz" || rc=$?
	log "VM ran $(elapsed "$t"); total $(elapsed "$t0"); exit $rc"
	return "$rc"
}

main "$@"
