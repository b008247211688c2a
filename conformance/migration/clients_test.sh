#!/usr/bin/env bash
# clients_test.sh: what each node variant's load starts (variants.sh and
# the files it sources) held to testdata/clients/<variant>.golden: the
# YAML every kubectl apply receives (the client pods' specs, their loops
# as the pods run them), every other kubectl and `ip netns exec` command
# with where its output goes, and the files the phase leaves in $OUT.
# kubectl, ip and metallb.sh are stubs that only write down what they are
# given, so no cluster is needed (make lint runs it; a second).
#
#   conformance/migration/clients_test.sh           # compare; exit 1 on a difference
#   conformance/migration/clients_test.sh -update   # rewrite the golden files
set -euo pipefail
shopt -s inherit_errexit
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
GOLDEN=$HERE/testdata/clients
update=0
[[ ${1:-} == -update ]] && update=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

LOG_PREFIX=clients_test
# shellcheck source=hack/cluster/lib.sh
. "$HERE/../../hack/cluster/lib.sh"
# shellcheck source=conformance/migration/variants.sh
. "$HERE/variants.sh"
read -r -a variants <<<"$(sed -n 's/^VARIANTS="\(.*\)"$/\1/p' "$CLUSTER_DIR/variant.sh")"
((${#variants[@]} > 0)) || die "no VARIANTS= line in $CLUSTER_DIR/variant.sh"

# The run's settings, fixed so that the golden files do not move with the
# lab's release or the checkout's path.
K8S_VERSION=vTEST
NODES=2
NETNS=kiplab
LOAD=/lab/load
CLUSTER_DIR=$tmp/cluster
OUT=$tmp/out
T=$tmp/transcript
export T

# fds <pid>: where the process's stdout and stderr go, $OUT shown as such
# (the caller's $BASHPID: inside $(...) the shell is another process).
fds() {
	local o e
	o=$(readlink "/proc/$1/fd/1")
	e=$(readlink "/proc/$1/fd/2")
	o=${o/#"$OUT"/\$OUT}
	e=${e/#"$OUT"/\$OUT}
	echo ">$o 2>$e"
}

# kc: kubectl's stub. Commands started in the background (logs -f) go to
# a file of their own, sorted at the end: their order is the scheduler's.
kc() {
	local me=$BASHPID
	case "$*" in
	*" logs -f "*) echo "kc $* $(fds "$me")" >>"$T.bg" ;;
	*"apply -f -"*)
		echo "kc $*" >>"$T"
		tee -a "$T" | sed -n 's/^metadata: {name: \([^,]*\), namespace: migration, labels: {extra: "1"}}$/\1/p' >>"$tmp/pods"
		echo "(end of stdin)" >>"$T"
		;;
	*" get svc kubernetes "*) echo "kc $*" >>"$T" && echo 10.96.0.1 ;;
	*" get svc pinned-node-1 "*) echo "kc $*" >>"$T" && echo 10.96.1.1 ;;
	*" get svc pinned-node-2 "*) echo "kc $*" >>"$T" && echo 10.96.1.2 ;;
	*" get svc hostsrv "*) echo "kc $*" >>"$T" && echo 10.96.2.1 ;;
	*" get configmap kube-proxy "*) echo "kc $*" >>"$T" && echo "strictARP: true" ;;
	*) echo "kc $*" >>"$T" ;;
	esac
}

# ip: the lab host's clients, started in the background.
ip() {
	local me=$BASHPID
	echo "ip $* $(fds "$me")" >>"$T.bg"
}

# pods_of (migrate.sh's): the extra pods the stub was given.
pods_of() { [[ ! -e $tmp/pods ]] || cat "$tmp/pods"; }

mkdir -p "$CLUSTER_DIR" "$GOLDEN"
cat >"$CLUSTER_DIR/metallb.sh" <<'SH'
#!/usr/bin/env bash
echo "metallb.sh $*" >>"$T"
case $1 in
version) echo v0.0.0-test ;;
arp) for a in "${@:2}"; do echo "$a macs=1 from=node-1 announcer=node-1"; done ;;
esac
SH
chmod +x "$CLUSTER_DIR/metallb.sh"

# transcript <variant>: what the variant's workload and a swap phase's
# load start and stop, as the golden file holds it.
transcript() {
	local f
	rm -rf "$OUT" "$T" "$T.bg" "$tmp/pods"
	mkdir -p "$OUT"
	NODE_VARIANT=$1
	{
		echo "== variant $1, $NODES nodes"
		echo "== variant_workload"
	} >>"$T"
	variant_workload
	echo "== variant_start_load swap" >>"$T"
	variant_start_load swap
	wait
	echo "== variant_stop_pods" >>"$T"
	variant_stop_pods
	{
		echo "== started in the background (sorted)"
		[[ ! -e $T.bg ]] || sort "$T.bg"
		echo "== \$OUT"
		for f in "$OUT"/*; do
			[[ -e $f ]] || continue
			echo "${f#"$OUT"/}: $(wc -l <"$f") lines"
		done
		[[ ! -e $OUT/report.txt ]] || cat "$OUT/report.txt"
	} >>"$T"
	cat "$T"
}

failed=0
for v in "${variants[@]}"; do
	transcript "$v" >"$tmp/got"
	if ((update)); then
		cp "$tmp/got" "$GOLDEN/$v.golden"
		echo "clients_test: wrote testdata/clients/$v.golden"
	elif [[ ! -e $GOLDEN/$v.golden ]]; then
		echo "clients_test: $v: no testdata/clients/$v.golden (run with -update)"
		failed=1
	elif ! diff -u "$GOLDEN/$v.golden" "$tmp/got"; then
		echo "clients_test: $v: differs from testdata/clients/$v.golden (above; -update rewrites it)"
		failed=1
	else
		echo "clients_test: ok: $v"
	fi
done
exit "$failed"
