#!/usr/bin/env bash
# make test's real-cluster step (`make cluster-conformance`): brings up a
# one-node IPv4 lab cluster of its own, runs upstream's Services
# Conformance specs against our proxy deployed from deploy/, and takes the
# cluster down again, whatever the result.
#
#   conformance/ci.sh
#   FOCUS='...' conformance/ci.sh      # another focus (default below)
#
# The cluster has its own network namespace (kipci) and state directory
# (.cache/cluster/ci-run), so it never touches a cluster that `make cluster`
# brought up; the binaries, node image and container images are the shared,
# cached ones. A cluster left behind by an interrupted run is taken down
# first. Exit status: the suite's (or up.sh's, if the cluster did not come up).
set -euo pipefail
shopt -s inherit_errexit
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)

export KIP_NETNS=${KIP_NETNS:-kipci}
export KIP_CLUSTER_RUN=${KIP_CLUSTER_RUN:-$REPO/.cache/cluster/ci-run}
export NODES=1 FAMILY=ipv4
export FOCUS=${FOCUS:-'\[sig-network\] Services.*\[Conformance\]'}

if ip netns list | grep -qw "$KIP_NETNS"; then
	echo "conformance/ci.sh: a cluster in netns $KIP_NETNS was left behind; taking it down" >&2
	"$REPO/hack/cluster/down.sh"
fi
trap '"$REPO/hack/cluster/down.sh"' EXIT

start=$(date +%s)
if ! "$REPO/hack/cluster/up.sh"; then
	echo "conformance/ci.sh: the cluster did not come up; logs in $KIP_CLUSTER_RUN/logs:" >&2
	shopt -s nullglob
	for f in "$KIP_CLUSTER_RUN"/logs/*.log; do
		echo "--- $f (last 15 lines)" >&2
		tail -n 15 "$f" >&2
	done
	exit 1
fi
up=$(($(date +%s) - start))
set +e
"$HERE/run.sh"
rc=$?
set -e
echo "conformance/ci.sh: cluster up in ${up}s, suite exit $rc, total $(($(date +%s) - start))s" >&2
if [[ $rc != 0 ]]; then
	echo "conformance/ci.sh: the proxy's log on the node:" >&2
	"$REPO/hack/cluster/kubectl.sh" -n kube-system logs --tail=40 -l k8s-app=kube-ipvs-proxy >&2 || true
fi
exit "$rc"
