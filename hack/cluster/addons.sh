#!/usr/bin/env bash
# The lab cluster's add-ons, applied by up.sh once the nodes are Ready (and
# safe to re-run on a running cluster): CoreDNS (manifests/coredns.yaml,
# its Service in the cluster's families) and our proxy with
# `kubectl apply -k hack/cluster/overlay`, as users deploy it. Waits for
# both to roll out. KIP_NO_PROXY=1: CoreDNS only.
set -euo pipefail
shopt -s inherit_errexit
# shellcheck source=hack/cluster/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ -e $RUN/cluster.env ]] || die "no cluster (make cluster)"
# shellcheck source=/dev/null
. "$RUN/cluster.env"

log "CoreDNS"
dns_ip=$(family_values "$DNS4" "$DNS6")
dns_families=$(family_values IPv4 IPv6)
sed -e "s/__DNS_IP__/${dns_ip%%,*}/" -e "s/__DNS_IPS__/${dns_ip//,/, }/" \
	-e "s/__DNS_FAMILIES__/${dns_families//,/, }/" \
	-e "s/__DNS_POLICY__/$([[ $FAMILY == dual ]] && echo RequireDualStack || echo SingleStack)/" \
	"$CLUSTER_DIR/manifests/coredns.yaml" | kc apply -f - >&2

if [[ -z ${KIP_NO_PROXY:-} ]]; then
	log "kube-ipvs-proxy: kubectl apply -k hack/cluster/overlay"
	kc apply -k "$CLUSTER_DIR/overlay" >&2
	kc -n kube-system rollout status ds/kube-ipvs-proxy --timeout=10m >&2
fi
kc -n kube-system rollout status deploy/coredns --timeout=10m >&2
kc get pods -A -o wide >&2
