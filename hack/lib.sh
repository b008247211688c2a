# shellcheck shell=bash
# The helpers of hack/'s scripts (sourced, not run): log, die, the apt
# helper, and the upstream release the lab builds.
#
#   LOG_PREFIX=vmlab                # before sourcing: log's prefix (default: the script's name)
#   . "$REPO/hack/lib.sh"
#
# It sets nothing but the names below, and no shell option: each script
# keeps its own `set -euo pipefail`.

HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# K8S_VERSION: the k8s.io/kubernetes release the lab builds (kube-apiserver,
# the kubelet, e2e.test, kubeadm's kube-proxy image tag...). Its one source
# is the require line of hack/k8s/go.mod; bumping it is editing that line
# (and the replace block's staging tags) and `go mod tidy`.
K8S_VERSION=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v[0-9]/ { print $2; exit }' "$HACK_DIR/k8s/go.mod")
[[ -n $K8S_VERSION ]] || {
	echo "hack/lib.sh: no k8s.io/kubernetes version in $HACK_DIR/k8s/go.mod" >&2
	exit 1
}
export K8S_VERSION

LOG_PREFIX=${LOG_PREFIX:-$(basename "$0")}

# log <words...>: one line on stderr, prefixed with LOG_PREFIX.
log() { echo "$LOG_PREFIX: $*" >&2; }

# die <words...>: logs "error: <words>" and exits 1.
die() {
	log "error: $*"
	exit 1
}

# is_installed <package>: the Debian package is installed.
is_installed() {
	[[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) == "install ok installed" ]]
}

# apt_update_once: apt-get update, at most once per script run.
APT_UPDATED=
apt_update_once() {
	[[ -n $APT_UPDATED ]] && return 0
	log "apt-get update"
	apt-get update -qq >&2
	APT_UPDATED=1
}

# apt_lists_once: apt-get update when apt has no package lists (a fresh
# machine), so that apt-cache knows the archive.
apt_lists_once() {
	compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null || apt_update_once
}

# apt_install <package...>: installs with apt those of the Debian packages
# that are not installed, after one apt-get update. Needs root.
apt_install() {
	local p missing=()
	for p in "$@"; do
		is_installed "$p" || missing+=("$p")
	done
	[[ ${#missing[@]} -eq 0 ]] && return 0
	apt_update_once
	log "apt-get install ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
