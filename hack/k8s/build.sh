#!/usr/bin/env bash
# Builds upstream Kubernetes binaries (k8s.io/kubernetes at hack/k8s/go.mod's
# version) and the lab's helpers from this directory's Go modules into a
# cache directory: the one build of upstream's components, for the
# integration harness (integration/apiserver, make apiserver, e2e, demo),
# the lab cluster (hack/cluster) and upstream's e2e suite (conformance/).
#
#   hack/k8s/build.sh [-f] [NAME...]    # build the named binaries if stale; print the bin dir
#
# NAMEs (default: kubelet kube-controller-manager kube-scheduler kubectl):
#   kube-apiserver kubelet kube-controller-manager kube-scheduler kubectl kubeadm kube-proxy agnhost
#              upstream's own mains, unchanged (the `tool` block of go.mod;
#              kube-apiserver through ./cmd/kube-apiserver, upstream's main)
#   etcd       a single-member embedded etcd (./cmd/etcd, go.etcd.io/etcd/server/v3)
#   regression-issue-74839
#              upstream's test image main of that name (the Conntrack
#              "invalid conntrack state" spec's server), unchanged
#   e2e.test   upstream's e2e suite with the network specs (./e2e, go test -c)
#   pause      the lab's sandbox process (./cmd/pause)
#   kimg       the image builder (./kimg, its own module: go-containerregistry)
#   coredns    CoreDNS with the plugins the lab uses (./coredns, its own module)
#
# Output: $KIP_K8S_BIN_DIR (default <repo>/.cache/k8s/bin). A binary is
# rebuilt when missing or older than one of its inputs: its module's go.mod
# and go.sum, this script, and its own package's files (-f: always). Builds
# run one at a time (flock), under `nice -n $KIP_K8S_NICE` (default 10),
# CGO_ENABLED=0, -trimpath, with upstream's version ldflags; each goes to a
# temp file and is moved in place, so a reader never sees a half-written
# file. Cold, the first k8s binary takes ~10 min on 2 cores; each further
# one 1-3 min (see hack/k8s/README.md).
set -euo pipefail
shopt -s inherit_errexit

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BIN_DIR=${KIP_K8S_BIN_DIR:-$REPO/.cache/k8s/bin}
NICE=${KIP_K8S_NICE:-10}
export PATH=$PATH:/usr/local/go/bin
LOG_PREFIX=k8s/build.sh
# shellcheck source=hack/lib.sh
. "$REPO/hack/lib.sh" # K8S_VERSION, log, die

force=0
names=()
for a in "$@"; do
	case $a in
	-f | --force) force=1 ;;
	-h | --help)
		sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
		exit 0
		;;
	-*) die "unknown flag $a (try --help)" ;;
	*) names+=("$a") ;;
	esac
done
[[ ${#names[@]} -gt 0 ]] || names=(kubelet kube-controller-manager kube-scheduler kubectl)

# fresh <binary> <input path...>: the binary exists and no input is newer.
fresh() {
	local bin=$1
	shift
	[[ -x $bin ]] || return 1
	local newer
	newer=$(find "$@" "$HERE/build.sh" -type f -newer "$bin" -print -quit)
	[[ -z $newer ]]
}

major=${K8S_VERSION#v}
minor=${major#*.}
ldflags="-s -w"
for kv in gitVersion=$K8S_VERSION gitMajor=${major%%.*} gitMinor=${minor%%.*} gitTreeState=clean; do
	ldflags+=" -X k8s.io/component-base/version.$kv"
done

# inputs_of <name>: the paths whose change makes the binary stale.
inputs_of() {
	case $1 in
	kubelet | kube-controller-manager | kube-scheduler | kubectl | kubeadm | kube-proxy | agnhost | regression-issue-74839) echo "$HERE/go.mod $HERE/go.sum" ;;
	kube-apiserver | etcd | pause) echo "$HERE/go.mod $HERE/go.sum $HERE/cmd/$1" ;;
	e2e.test) echo "$HERE/go.mod $HERE/go.sum $HERE/e2e" ;;
	kimg | coredns) echo "$HERE/$1" ;;
	*) die "unknown binary $1 (try --help)" ;;
	esac
}

for n in "${names[@]}"; do
	inputs_of "$n" >/dev/null # dies on an unknown name, once
done

# Everything fresh: done, without waiting for another build's lock.
if [[ $force == 0 ]]; then
	all_fresh=1
	for n in "${names[@]}"; do
		# shellcheck disable=SC2046 # a word list of paths
		fresh "$BIN_DIR/$n" $(inputs_of "$n") || { all_fresh=0; break; }
	done
	if [[ $all_fresh == 1 ]]; then
		echo "$BIN_DIR"
		exit 0
	fi
fi

mkdir -p "$BIN_DIR"
exec 9>"$BIN_DIR/.build.lock"
if ! flock -n 9; then
	log "another build is running; waiting for it"
	flock 9
fi

tmp=$(mktemp -d "$BIN_DIR/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# build <name> <module dir> <go command...>: runs the command (which
# writes $tmp/<name>) in the module dir unless the binary is fresh.
build() {
	local name=$1 dir=$2
	shift 2
	# shellcheck disable=SC2046 # a word list of paths
	if [[ $force == 0 ]] && fresh "$BIN_DIR/$name" $(inputs_of "$name"); then
		return 0
	fi
	log "building $name (minutes when cold)"
	local start
	start=$(date +%s)
	(cd "$dir" && CGO_ENABLED=0 nice -n "$NICE" "$@") || die "building $name failed"
	mv -f "$tmp/$name" "$BIN_DIR/$name"
	log "built $name in $(($(date +%s) - start))s"
}

for n in "${names[@]}"; do
	case $n in
	kubelet | kube-controller-manager | kube-scheduler | kubectl | kubeadm | kube-proxy)
		build "$n" "$HERE" go build -trimpath -ldflags "$ldflags" -o "$tmp/$n" "k8s.io/kubernetes/cmd/$n"
		;;
	agnhost | regression-issue-74839)
		build "$n" "$HERE" go build -trimpath -ldflags "-s -w" -o "$tmp/$n" "k8s.io/kubernetes/test/images/$n"
		;;
	e2e.test)
		build "$n" "$HERE" go test -c -trimpath -ldflags "$ldflags" -o "$tmp/$n" ./e2e
		;;
	kube-apiserver | etcd)
		build "$n" "$HERE" go build -trimpath -ldflags "$ldflags" -o "$tmp/$n" "./cmd/$n"
		;;
	pause)
		build "$n" "$HERE" go build -trimpath -ldflags "-s -w" -o "$tmp/$n" ./cmd/pause
		;;
	kimg)
		build "$n" "$HERE/kimg" go build -trimpath -o "$tmp/$n" .
		;;
	coredns)
		build "$n" "$HERE/coredns" go build -trimpath -ldflags "-s -w" -o "$tmp/$n" .
		;;
	*) die "unknown binary $n (try --help)" ;;
	esac
done
echo "$BIN_DIR"
