# shellcheck shell=bash
# shellcheck disable=SC2034 # the settings are used by the scripts that source this
# Shared settings and helpers of hack/cluster's scripts (sourced, not run).
#
# Knobs (environment):
#   NODES            number of node VMs (default 1)
#   FAMILY           ipv4 (default), ipv6 or dual
#   ZONES            how many zones the nodes are spread over, round robin,
#                    as topology.kubernetes.io/zone=zone-<k> (default NODES:
#                    a zone per node; upstream's Topology Hints and Traffic
#                    Distribution specs need 2 and 3 zones)
#   KIP_CLUSTER_CACHE  cache and state root (default <repo>/.cache/cluster)
#   KIP_CLUSTER_RUN  the running cluster's state (default $KIP_CLUSTER_CACHE/run)
#   KIP_NETNS        the lab's network namespace (default kiplab); another
#                    name and run dir give a second cluster beside the first
#   KIP_NODE_MEM     MiB per node VM (default 3072)
#   KIP_NODE_SMP     vCPUs per node VM (default 2)
#   KIP_KUBELET_V    kubelet log verbosity (default 1)
#   KIP_NODE_VARIANT the nodes as some users have them (default: default,
#                    the lab's own); see variant.sh for the others

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CLUSTER_DIR=$REPO/hack/cluster
CACHE=${KIP_CLUSTER_CACHE:-$REPO/.cache/cluster}
RUN=${KIP_CLUSTER_RUN:-$CACHE/run} # the running cluster's state: pki, logs, pids, disks
K8S_BIN=${KIP_K8S_BIN_DIR:-$REPO/.cache/k8s/bin} # hack/k8s/build.sh's: etcd, kube-apiserver, the kubelet...
NODES=${NODES:-1}
FAMILY=${FAMILY:-ipv4}
ZONES=${ZONES:-$NODES}
NODE_MEM=${KIP_NODE_MEM:-3072}
NODE_SMP=${KIP_NODE_SMP:-2}
KUBELET_V=${KIP_KUBELET_V:-1}
# ours: our DaemonSet (deploy/base); upstream: kube-proxy in IPVS mode by kubeadm.
KUBE_PROXY=${KIP_KUBE_PROXY:-ours}
# default, no-cluster-cidr, forward-drop, forward-drop-nft, legacy, nodelocaldns or flannel (variant.sh).
NODE_VARIANT=${KIP_NODE_VARIANT:-default}
export PATH=$PATH:/usr/local/go/bin
LOG_PREFIX=${LOG_PREFIX:-cluster}
# shellcheck source=hack/lib.sh
. "$REPO/hack/lib.sh" # K8S_VERSION, log, die, apt_install

# The lab network: one network namespace holding the control plane, a
# bridge and a tap per node VM; it routes between the nodes' pod CIDRs.
NETNS=${KIP_NETNS:-kiplab}
BRIDGE=kipbr0
GW4=10.88.0.1
GW6=fd00:88::1
API_PORT=6443
# Pod and Service ranges, both families; FAMILY picks which are used.
POD_CIDR4=10.244.0.0/16
POD_CIDR6=fd00:10:244::/56
SVC_CIDR4=10.96.0.0/16
SVC_CIDR6=fd00:10:96::/112
DNS4=10.96.0.10
DNS6=fd00:10:96::a

# ensure_host_packages: installs with apt what the lab needs on the host
# (qemu, mmdebstrap, mkfs.ext4, openssl, flock), and fetches apt's lists
# when they are empty (node-image.sh resolves package versions from them).
ensure_host_packages() {
	apt_lists_once
	apt_install qemu-system-x86 mmdebstrap e2fsprogs openssl iproute2 util-linux
}

node_name() { echo "node-$1"; }
node_ip4() { echo "10.88.0.$((10 + $1))"; }
node_ip6() { echo "fd00:88::$((10 + $1))"; }

# family_values <v4> <v6>: the value(s) for FAMILY, comma separated.
family_values() {
	case $FAMILY in
	ipv4) echo "$1" ;;
	ipv6) echo "$2" ;;
	dual) echo "$1,$2" ;;
	*) die "FAMILY=$FAMILY: want ipv4, ipv6 or dual" ;;
	esac
}

# Runs a command inside the lab's network namespace.
in_ns() { ip netns exec "$NETNS" "$@"; }

# kubectl as the cluster admin, inside the namespace.
kc() { in_ns "$K8S_BIN/kubectl" --kubeconfig "$RUN/admin.kubeconfig" "$@"; }

# start_daemon <name> <command...>: runs it in the namespace in the
# background, its output in $RUN/logs/<name>.log, its pid in $RUN/pids/<name>.
start_daemon() {
	local name=$1
	shift
	mkdir -p "$RUN/logs" "$RUN/pids"
	setsid ip netns exec "$NETNS" "$@" >"$RUN/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$RUN/pids/$name"
}

# check_daemons: dies naming the first daemon started by start_daemon that
# has exited, with the end of its log.
check_daemons() {
	local f name
	for f in "$RUN"/pids/*; do
		[[ -e $f ]] || continue
		kill -0 "$(cat "$f")" 2>/dev/null && continue
		name=$(basename "$f")
		tail -n 5 "$RUN/logs/$name.log" >&2 || true
		die "$name exited (log: $RUN/logs/$name.log)"
	done
}

# wait_for <seconds> <what> <command...>: polls the command once a second;
# fails early when a daemon has died.
wait_for() {
	local limit=$1 what=$2 i
	shift 2
	for ((i = 0; i < limit; i++)); do
		"$@" >/dev/null 2>&1 && return 0
		((i % 5 == 0)) && check_daemons
		sleep 1
	done
	die "timed out after ${limit}s waiting for $what"
}
