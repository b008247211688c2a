#!/usr/bin/env bash
# kubectl (hack/k8s's, v1.36.3) as the lab cluster's admin, run inside the
# lab's network namespace where the API server and the nodes are.
#   hack/cluster/kubectl.sh get nodes -o wide
set -euo pipefail
# shellcheck source=hack/cluster/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ -e $RUN/admin.kubeconfig ]] || die "no cluster (make cluster)"
exec ip netns exec "$NETNS" "$K8S_BIN/kubectl" --kubeconfig "$RUN/admin.kubeconfig" "$@"
