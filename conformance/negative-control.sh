#!/usr/bin/env bash
# Negative control: proves upstream's Services specs depend on our proxy.
# On a cluster from `make cluster`: deletes the proxy (kubectl delete -k of
# the lab overlay), removes its kernel state on every node with
# `kube-ipvs-proxy --cleanup` (deploy/rollback, as deploy/README.md's
# roll back), runs one Services spec and expects it to FAIL, then puts the
# proxy back with kubectl apply -k and waits for it.
#
#   conformance/negative-control.sh   # exit 0: the spec failed without the proxy
#
# Exit 1 when the spec passed without the proxy (the suite would not notice
# a missing proxy) or when the proxy could not be restored.
set -euo pipefail
shopt -s inherit_errexit
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/cluster/lib.sh
. "$HERE/../hack/cluster/lib.sh"

SPEC=${SPEC:-'\[sig-network\] Services should serve a basic endpoint from pods.*\[Conformance\]'}
IMAGE=${KIP_PROXY_IMAGE:-localhost/kube-ipvs-proxy:lab}
[[ -e $RUN/admin.kubeconfig ]] || die "no cluster: run make cluster first"

restore() {
	log "restoring the proxy: kubectl apply -k hack/cluster/overlay"
	kc delete ds -n kube-system kube-ipvs-proxy-cleanup --ignore-not-found >&2 || true
	kc apply -k "$CLUSTER_DIR/overlay" >&2
	kc -n kube-system rollout status ds/kube-ipvs-proxy --timeout=10m >&2
}
trap 'restore || log "error: could not restore the proxy"' EXIT

log "removing the proxy: kubectl delete -k hack/cluster/overlay"
kc delete -k "$CLUSTER_DIR/overlay" --wait=true >&2
kc -n kube-system wait --for=delete pod -l k8s-app=kube-ipvs-proxy --timeout=5m >&2 || true
log "kube-ipvs-proxy --cleanup on every node (deploy/rollback)"
kc kustomize "$REPO/deploy/rollback" |
	kc set image --local -f - kube-ipvs-proxy-cleanup="$IMAGE" -o yaml |
	kc apply -f - >&2
kc -n kube-system rollout status ds/kube-ipvs-proxy-cleanup --timeout=10m >&2
kc -n kube-system logs -l k8s-app=kube-ipvs-proxy-cleanup -c kube-ipvs-proxy-cleanup --prefix --timestamps >&2 || true
kc -n kube-system delete ds kube-ipvs-proxy-cleanup >&2

log "running the spec without the proxy; it must fail"
if FOCUS="$SPEC" "$HERE/run.sh"; then
	log "FAIL: the spec passed without the proxy"
	exit 1
fi
log "OK: the spec failed without the proxy (its log is above)"
