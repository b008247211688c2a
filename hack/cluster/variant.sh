#!/usr/bin/env bash
# The lab's nodes as some users have them (KIP_NODE_VARIANT, recorded in
# the cluster's cluster.env): up.sh runs `variant.sh check` before
# anything starts and `variant.sh nodes` once the nodes are Ready, before
# the add-ons, so kube-proxy and the kubelet's later rules meet the node
# already changed.
#
#   default           the lab's own nodes: nothing changes
#   no-cluster-cidr   kubeadm's config without networking.podSubnet, so
#                     kube-proxy's ConfigMap has no clusterCIDR (addons.sh)
#   forward-drop      filter FORWARD policy DROP with iptables-nft, as
#                     Docker sets it, plus the pod-CIDR accepts flannel adds
#   forward-drop-nft  a `table inet filter` forward chain of policy drop,
#                     as firewalld has it (established/related and the
#                     pod-CIDR accepts)
#   legacy            iptables and ip6tables are iptables-legacy on the node
#                     (update-alternatives), the kubelet restarted so its
#                     canary chains are legacy ones; kube-proxy's image picks
#                     legacy from them as upstream's iptables-wrapper does
#   nodelocaldns      NodeLocal DNSCache as its IPVS-mode manifest sets it
#                     up: 169.254.20.10 on a dummy nodelocaldns interface,
#                     node-cache's NOTRACK rules, the kubelet's clusterDNS
#                     pointed at it; then the lab's CoreDNS as the cache,
#                     a host-network DaemonSet (nodelocaldns.sh)
#   flannel           flannel (VXLAN) as the CNI instead of the lab's: the
#                     lab's CNI config goes before the add-ons, addons.sh
#                     deploys flannel after kube-proxy, up.sh adds no
#                     podCIDR routes to the namespace (flannel.sh)
#   metallb-l2        kube-proxy's ConfigMap with ipvs.strictARP: true from
#                     the start (addons.sh), as MetalLB's guide has it; no
#                     node change. MetalLB itself (metallb.sh up) comes with
#                     the migration run's workload, once kube-proxy serves
#                     the API's ClusterIP
#
# The node changes run as one privileged host-network, host-PID pod per
# node (kube-proxy's image, imported at boot on KIP_KUBE_PROXY=upstream
# clusters) that enters the node's namespaces with nsenter and uses the
# node's own iptables and nft.
set -euo pipefail
shopt -s inherit_errexit
# shellcheck source=hack/cluster/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=hack/cluster/nodelocaldns.sh
. "$CLUSTER_DIR/nodelocaldns.sh"

VARIANTS="default no-cluster-cidr forward-drop forward-drop-nft legacy nodelocaldns flannel metallb-l2"
TODO_VARIANTS=""

# check_variant: dies on an unknown variant, on a named one not built yet,
# and on a node variant without kube-proxy's image on the nodes.
check_variant() {
	if [[ " $TODO_VARIANTS " == *" $NODE_VARIANT "* ]]; then
		die "node variant $NODE_VARIANT: not implemented yet (implemented: $VARIANTS)"
	fi
	[[ " $VARIANTS " == *" $NODE_VARIANT "* ]] ||
		die "KIP_NODE_VARIANT=$NODE_VARIANT: want one of $VARIANTS"
	case $NODE_VARIANT in
	default | no-cluster-cidr) ;;
	metallb-l2) [[ $KUBE_PROXY == upstream ]] ||
		die "node variant metallb-l2 needs KIP_KUBE_PROXY=upstream (its strictARP is set in kubeadm's kube-proxy ConfigMap)" ;;
	*) [[ $KUBE_PROXY == upstream ]] ||
		die "node variant $NODE_VARIANT needs KIP_KUBE_PROXY=upstream (its node setup runs kube-proxy's image)" ;;
	esac
	if [[ $NODE_VARIANT == nodelocaldns && $FAMILY == ipv6 ]]; then
		die "node variant nodelocaldns: its cache's address $NODELOCAL_IP is IPv4; want FAMILY=ipv4 or dual"
	fi
	[[ $NODE_VARIANT != flannel || $FAMILY == ipv4 ]] || die "node variant flannel: IPv4 only, not FAMILY=$FAMILY"
}

# pod_cidrs: the cluster's pod CIDRs of FAMILY, space separated.
pod_cidrs() { family_values "$POD_CIDR4" "$POD_CIDR6" | tr ',' ' '; }

# node_script: the shell script run on every node for NODE_VARIANT.
node_script() {
	local c t f
	case $NODE_VARIANT in
	forward-drop)
		echo "set -e"
		for c in $(pod_cidrs); do
			if [[ $c == *:* ]]; then t=ip6tables; else t=iptables; fi
			echo "$t -w -A FORWARD -s $c -j ACCEPT"
			echo "$t -w -A FORWARD -d $c -j ACCEPT"
		done
		echo "iptables -w -P FORWARD DROP; ip6tables -w -P FORWARD DROP"
		echo "iptables-save -t filter | grep -E '^(:FORWARD|-A FORWARD)'"
		;;
	forward-drop-nft)
		local accepts=""
		for c in $(pod_cidrs); do
			if [[ $c == *:* ]]; then f=ip6; else f=ip; fi
			accepts+="$f saddr $c accept; $f daddr $c accept; "
		done
		echo "set -e"
		echo "nft 'table inet filter { chain forward { type filter hook forward priority 0; policy drop; ct state { established, related } accept; $accepts}; }'"
		echo "nft list table inet filter"
		;;
	legacy)
		echo "set -e"
		echo "update-alternatives --set iptables /usr/sbin/iptables-legacy"
		echo "update-alternatives --set ip6tables /usr/sbin/ip6tables-legacy"
		# The kubelet's canary chains, made in nft at its first start, go,
		# so nft holds nothing a wrapper could take for a live nft node.
		echo "nft list tables | grep -E 'table ip6? (mangle|nat|filter)\$' | while read -r _ fam name; do nft delete table \$fam \$name; done"
		echo "iptables --version"
		echo "systemctl restart --no-block kubelet"
		;;
	nodelocaldns) nodelocaldns_node_script ;;
	flannel) "$CLUSTER_DIR/flannel.sh" script ;;
	*) die "node variant $NODE_VARIANT has no node script" ;;
	esac
}

# on_nodes: runs node_script on every node, one pod each; prints their logs.
on_nodes() {
	local script i node
	script=$(node_script)
	kc create namespace kip-variant --dry-run=client -o yaml | kc apply -f - >&2
	for ((i = 1; i <= NODES; i++)); do
		node=$(node_name "$i")
		kc apply -f - >&2 <<YAML
apiVersion: v1
kind: Pod
metadata: {name: variant-$node, namespace: kip-variant}
spec:
  nodeName: $node
  hostNetwork: true
  hostPID: true
  restartPolicy: Never
  tolerations: [{operator: Exists}]
  containers:
  - name: setup
    image: registry.k8s.io/kube-proxy:$K8S_VERSION
    imagePullPolicy: IfNotPresent
    command: [nsenter, -t, "1", -m, -n, -u, -i, --, /bin/sh, -c]
    args:
    - |
      ${script//$'\n'/$'\n'      }
    securityContext: {privileged: true}
YAML
	done
	for ((i = 1; i <= NODES; i++)); do
		node=$(node_name "$i")
		kc -n kip-variant wait --for=jsonpath='{.status.phase}'=Succeeded "pod/variant-$node" --timeout=5m >&2 ||
			die "$node: the $NODE_VARIANT setup did not succeed: $(kc -n kip-variant logs "variant-$node" 2>&1 | tail -n 5)"
		kc -n kip-variant logs "variant-$node" | sed "s/^/$node: /" >&2
	done
	kc delete namespace kip-variant --wait=false >&2
	if [[ $NODE_VARIANT == legacy || $NODE_VARIANT == nodelocaldns ]]; then
		# The kubelet restarts: Ready again (legacy: then its legacy canary
		# chains; nodelocaldns: with clusterDNS the node's cache).
		sleep 5
		for ((i = 1; i <= NODES; i++)); do
			kc wait --for=condition=Ready "node/$(node_name "$i")" --timeout=5m >&2
		done
	fi
}

case ${1:-} in
check) check_variant ;;
script) node_script ;;
nodes)
	[[ -e $RUN/cluster.env ]] || die "no cluster (make cluster)"
	# shellcheck source=/dev/null
	. "$RUN/cluster.env"
	check_variant
	case $NODE_VARIANT in
	default | no-cluster-cidr | metallb-l2) log "node variant $NODE_VARIANT: nothing to change on the nodes" ;;
	*) on_nodes ;;
	esac
	if [[ $NODE_VARIANT == nodelocaldns ]]; then nodelocaldns_deploy; fi
	;;
*) die "usage: variant.sh check|script|nodes" ;;
esac
