#!/usr/bin/env bash
# Runs upstream's e2e suite (`make e2e-upstream`) against the lab cluster
# that `make cluster` brought up: hack/k8s's e2e.test (upstream's network
# specs, unchanged) with --provider=skeleton and our kubectl, inside the
# lab's network namespace, so the specs reach node IPs and NodePorts.
#
#   conformance/run.sh                                   # FOCUS='\[sig-network\]'
#   FOCUS='\[sig-network\] Services.*\[Conformance\]' conformance/run.sh
#   SKIP_EXTRA='regex' conformance/run.sh                # skip more, ad hoc
#
# Skips: conformance/skips.txt (one regex per line, each with its reason).
# Output: the suite's console on stdout and in .cache/cluster/e2e/<stamp>/e2e.log,
# its JUnit XML in the same directory, and a summary line at the end.
# Exit status: the suite's.
set -euo pipefail
shopt -s inherit_errexit
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/cluster/lib.sh
. "$HERE/../hack/cluster/lib.sh"

FOCUS=${FOCUS:-'\[sig-network\]'}
[[ -e $RUN/admin.kubeconfig ]] || die "no cluster: run make cluster first"
# shellcheck source=/dev/null
. "$RUN/cluster.env"
"$REPO/hack/k8s/build.sh" e2e.test kubectl >/dev/null

skip=$(sed -e '/^#/d' -e '/^[[:space:]]*$/d' -e 's/ # .*$//' "$HERE/skips.txt" | paste -sd'|')
[[ -n ${SKIP_EXTRA:-} ]] && skip="$skip|$SKIP_EXTRA"
out=$CACHE/e2e/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
log "e2e.test focus=$FOCUS (NODES=$NODES ZONES=${ZONES:-?} FAMILY=$FAMILY), output in $out"
start=$(date +%s)
set +e
in_ns "$K8S_BIN/e2e.test" \
	--provider=skeleton --kubeconfig="$RUN/admin.kubeconfig" --kubectl-path="$K8S_BIN/kubectl" \
	--num-nodes="$NODES" --report-dir="$out" \
	--ginkgo.focus="$FOCUS" --ginkgo.skip="$skip" --ginkgo.no-color --ginkgo.timeout=6h \
	--ginkgo.flake-attempts=1 2>&1 | tee "$out/e2e.log"
rc=${PIPESTATUS[0]}
set -e
wall=$(($(date +%s) - start))
summary=$(grep -E '^Ran [0-9]+ of [0-9]+ Specs' "$out/e2e.log" | tail -n1 || true)
result=$(grep -E 'Passed \| [0-9]+ Failed' "$out/e2e.log" | tail -n1 || true)
log "wall ${wall}s; ${summary:-no summary}; ${result:-no result line}; exit $rc"
exit "$rc"
