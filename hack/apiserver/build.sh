#!/usr/bin/env bash
# Builds a real kube-apiserver (k8s.io/kubernetes v1.36.3) and an embedded
# etcd (go.etcd.io/etcd/server/v3 embed) from this separate Go module into a
# cache directory, for the integration harness in integration/apiserver.
#
#   hack/apiserver/build.sh            # build if stale, print the bin dir
#   hack/apiserver/build.sh -f         # rebuild even if fresh
#
# Output: $KIP_APISERVER_BIN_DIR (default <repo>/.cache/apiserver/bin) with
# kube-apiserver and etcd. The build is skipped when both binaries are newer
# than go.mod, go.sum, this script and every .go file of the module. A lock
# (flock on the bin dir's parent) keeps concurrent callers from building
# twice; the binaries are built into a temp dir and moved in place, so a
# reader never sees a half-written file.
#
# Knobs: KIP_APISERVER_BIN_DIR, KIP_APISERVER_NICE (default 10; the machine
# is shared with other builds), GOFLAGS/GOCACHE as usual.
# A cold build takes ~5-8 min on 2 cores; see integration/apiserver/README.md.
set -euo pipefail
shopt -s inherit_errexit

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BIN_DIR=${KIP_APISERVER_BIN_DIR:-$REPO/.cache/apiserver/bin}
NICE=${KIP_APISERVER_NICE:-10}
K8S_VERSION=v1.36.3
export PATH=$PATH:/usr/local/go/bin

force=0
case "${1:-}" in
-f | --force) force=1 ;;
-h | --help)
	sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
	;;
"") ;;
*)
	echo "build.sh: unknown argument $1 (try --help)" >&2
	exit 2
	;;
esac

log() { echo "apiserver/build.sh: $*" >&2; }

# fresh: both binaries exist and none of the inputs is newer than the oldest.
fresh() {
	local b
	for b in kube-apiserver etcd; do
		[[ -x $BIN_DIR/$b ]] || return 1
	done
	local oldest=$BIN_DIR/kube-apiserver
	[[ $BIN_DIR/etcd -ot $oldest ]] && oldest=$BIN_DIR/etcd
	local newer
	newer=$(find "$HERE" \( -name '*.go' -o -name go.mod -o -name go.sum -o -name build.sh \) -newer "$oldest" -print -quit)
	[[ -z $newer ]]
}

mkdir -p "$BIN_DIR"
exec 9>"$BIN_DIR/.build.lock"
if ! flock -n 9; then
	log "another build is running; waiting for it"
	flock 9
fi

if [[ $force == 0 ]] && fresh; then
	echo "$BIN_DIR"
	exit 0
fi

ldflags="-s -w"
for kv in gitVersion=$K8S_VERSION gitMajor=1 gitMinor=36 gitTreeState=clean; do
	ldflags+=" -X k8s.io/component-base/version.$kv"
done

tmp=$(mktemp -d "$BIN_DIR/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
log "building kube-apiserver $K8S_VERSION and etcd into $BIN_DIR (minutes when cold, seconds when only linking)"
start=$(date +%s)
(cd "$HERE" && CGO_ENABLED=0 nice -n "$NICE" go build -trimpath -ldflags "$ldflags" \
	-o "$tmp/" ./cmd/kube-apiserver ./cmd/etcd)
mv -f "$tmp/kube-apiserver" "$tmp/etcd" "$BIN_DIR/"
log "built in $(($(date +%s) - start))s"
echo "$BIN_DIR"
