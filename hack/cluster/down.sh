#!/usr/bin/env bash
# Stops the lab cluster (`make cluster-down`): the node VMs and the control
# plane, by the pids up.sh recorded, then deletes the network namespace.
# Logs stay in .cache/cluster/run/logs until the next `make cluster`.
set -euo pipefail
shopt -s inherit_errexit
# shellcheck source=hack/cluster/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

stop() { # stop <pid file>: TERM, then KILL after 10s
	local pid
	pid=$(cat "$1" 2>/dev/null) || return 0
	rm -f "$1"
	kill -0 "$pid" 2>/dev/null || return 0
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 1 20); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.5
	done
	kill -9 "$pid" 2>/dev/null || true
}

shopt -s nullglob
for f in "$RUN"/pids/qemu-*; do stop "$f"; done
for n in kube-scheduler kube-controller-manager kube-apiserver etcd; do
	stop "$RUN/pids/$n"
done
if ip netns list | grep -qw "$NETNS"; then
	ip netns del "$NETNS"
fi
log "cluster down"
