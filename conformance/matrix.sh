#!/usr/bin/env bash
# The node matrix (`make migration-matrix VARIANTS="..."`): the migration
# run (migrate.sh: the same load; its phases but upstream's e2e, which
# KIP_MIGRATION_PHASES can add back or narrow further) once per node
# variant, each on a two-node lab cluster brought up for that variant
# (hack/cluster/variant.sh) and taken down after it. Each variant's report replaces that variant's block of
# conformance/migration/RESULTS.md; its `migration:` lines carry
# node=<variant>. A variant that fails or is not implemented yet is named
# at the end and the matrix exits non-zero; the others still run.
#
#   conformance/matrix.sh no-cluster-cidr forward-drop
#   KIP_MIGRATION_PHASES="swap rollback" conformance/matrix.sh legacy
#
# Needs root; wants no lab cluster up when it starts.
set -euo pipefail
shopt -s inherit_errexit
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/cluster/lib.sh
. "$HERE/../hack/cluster/lib.sh"

(($# > 0)) || die "usage: matrix.sh <variant>... (default no-cluster-cidr forward-drop forward-drop-nft legacy nodelocaldns flannel metallb-l2)"
if [[ -e $RUN/cluster.env ]] && ip netns list | grep -qw "$NETNS"; then
	die "a lab cluster is up: make cluster-down first (each variant brings up its own)"
fi

failed=()
for v in "$@"; do
	if ! KIP_NODE_VARIANT=$v KIP_KUBE_PROXY=upstream "$CLUSTER_DIR/variant.sh" check; then
		failed+=("$v")
		continue
	fi
	# Upstream's e2e after the swap is make migration's (the default
	# node); a variant runs the phases that load its node: the lab's
	# baseline restart, the swap, the config edit, the rollback and the
	# control.
	want=${KIP_MIGRATION_PHASES:-restart swap config rollback control}
	# metallb-l2's nodes start with strictARP true, so the config phase's
	# edit (strictARP false to true) would change nothing and wait for a
	# restart that never comes: unless told otherwise, it has no config
	# phase.
	if [[ $v == metallb-l2 && -z ${KIP_MIGRATION_PHASES:-} ]]; then want="restart swap rollback control"; fi
	# flannel's nodes carry every request over VXLAN, and on this lab's
	# TCG VMs at the common rate kube-proxy restarted onto itself (the
	# run's baseline) lost requests, so no proxy could show zero there;
	# at half the rate it lost none (deploy/README.md's flannel row has
	# the runs). Unless told otherwise, flannel runs at half the rate.
	rate=${KIP_MIGRATION_RATE:-12}
	if [[ $v == flannel && -z ${KIP_MIGRATION_RATE:-} ]]; then rate=6; fi
	log "node variant $v: the migration run (phases: $want; load rate $rate)"
	phases=${KIP_MIGRATION_PHASES:+ KIP_MIGRATION_PHASES=\"$want\"}
	if ! KIP_MIGRATION_RATE=$rate KIP_MIGRATION_PHASES=$want KIP_NODE_VARIANT=$v KIP_MIGRATION_COMMAND="make migration-matrix VARIANTS=$v$phases (conformance/matrix.sh)" \
		"$HERE/migrate.sh"; then
		log "node variant $v: the run failed; the cluster goes down"
		failed+=("$v")
		if ip netns list | grep -qw "$NETNS"; then "$CLUSTER_DIR/down.sh" || true; fi
	fi
done

log "results: $HERE/migration/RESULTS.md"
for v in "$@"; do
	sed -n "/^## node=$v\$/,/^## node=/p" "$HERE/migration/RESULTS.md" | grep '^migration:' || true
done
((${#failed[@]} == 0)) || die "failed or not implemented yet: ${failed[*]}"
