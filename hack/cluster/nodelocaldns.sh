# shellcheck shell=bash
# The node variant nodelocaldns (variant.sh; sourced, not run): NodeLocal
# DNSCache as its manifest sets it up for kube-proxy's IPVS mode
# (kubernetes' cluster/addons/dns/nodelocaldns), with the lab's CoreDNS
# in place of node-cache, whose module (k8s.io/dns) is not served here.
#
# On each node, by the variant's node pod (nodelocaldns_node_script):
#   - a dummy interface nodelocaldns holding 169.254.20.10/32, as
#     node-cache makes it;
#   - node-cache's iptables rules for that address, with the node's own
#     iptables (nft here): NOTRACK in raw PREROUTING and OUTPUT for DNS to
#     it and from it (udp and tcp, port 53) and for its health port, and
#     the filter INPUT and OUTPUT accepts node-cache adds beside them;
#   - the kubelet's clusterDNS pointed at 169.254.20.10 (its config is on
#     the read-only config disk, so an edited copy is bind-mounted over
#     it) and the kubelet restarted: pods made from then on resolve
#     through the node's cache, as kubeadm users get by editing the
#     kubelet's config in IPVS mode.
# Then, once (nodelocaldns_deploy): the kube-dns-upstream Service and the
# node-local-dns DaemonSet (manifests/nodelocaldns/).
#
# node-cache would remake the interface and rules every minute; nothing
# here does, so the migration run's check (conformance/migration/
# nodelocaldns.sh) sees it if a proxy removes them.

NODELOCAL_IP=169.254.20.10
NODELOCAL_IF=nodelocaldns
NODELOCAL_COMMENT="NodeLocal DNS Cache: skip conntrack"

# nodelocaldns_rules: node-cache's rules, one "<table> <chain> <target>
# <match...>" a line.
nodelocaldns_rules() {
	local p
	for p in udp tcp; do
		echo "raw PREROUTING NOTRACK -p $p -d $NODELOCAL_IP --dport 53"
		echo "filter INPUT ACCEPT -p $p -d $NODELOCAL_IP --dport 53"
		echo "raw OUTPUT NOTRACK -p $p -s $NODELOCAL_IP --sport 53"
		echo "filter OUTPUT ACCEPT -p $p -s $NODELOCAL_IP --sport 53"
		# The node's own queries (host-network pods).
		echo "raw OUTPUT NOTRACK -p $p -d $NODELOCAL_IP --dport 53"
	done
	# The kubelet's probes of the cache's health port.
	echo "raw OUTPUT NOTRACK -p tcp -d $NODELOCAL_IP --dport 8080"
	echo "raw OUTPUT NOTRACK -p tcp -s $NODELOCAL_IP --sport 8080"
}

# nodelocaldns_rule_count: how many rules carry NODELOCAL_COMMENT on a
# node set up by nodelocaldns_node_script.
nodelocaldns_rule_count() { nodelocaldns_rules | wc -l; }

# nodelocaldns_node_script: the node's part, a /bin/sh script run in the
# node's namespaces.
nodelocaldns_node_script() {
	local table chain target match
	echo "set -e"
	echo "ip link add $NODELOCAL_IF type dummy"
	echo "ip addr add $NODELOCAL_IP/32 dev $NODELOCAL_IF"
	while read -r table chain target match; do
		echo "iptables -w -t $table -I $chain $match -m comment --comment '$NODELOCAL_COMMENT' -j $target"
	done < <(nodelocaldns_rules)
	echo "sed 's/^clusterDNS: .*/clusterDNS: [$NODELOCAL_IP]/' /kip/kubelet.yaml >/run/kip-kubelet-nodelocaldns.yaml"
	echo "grep -qx 'clusterDNS: \\[$NODELOCAL_IP\\]' /run/kip-kubelet-nodelocaldns.yaml"
	echo "mount --bind /run/kip-kubelet-nodelocaldns.yaml /kip/kubelet.yaml"
	echo "ip -brief addr show dev $NODELOCAL_IF"
	echo "echo \"rules: \$(iptables-save | grep -c '$NODELOCAL_COMMENT')\""
	echo "grep '^clusterDNS:' /kip/kubelet.yaml"
	echo "systemctl restart --no-block kubelet"
}

# nodelocaldns_deploy: kube-dns-upstream, then the caches, whose Corefile
# names its ClusterIP; waits for every node's cache.
nodelocaldns_deploy() {
	local dir=$CLUSTER_DIR/manifests/nodelocaldns upstream
	log "NodeLocal DNSCache: kube-dns-upstream and the node-local-dns DaemonSet on $NODELOCAL_IP"
	kc apply -f "$dir/upstream.yaml" >&2
	upstream=$(kc -n kube-system get svc kube-dns-upstream -o jsonpath='{.spec.clusterIP}')
	[[ -n $upstream ]] || die "Service kube-system/kube-dns-upstream has no clusterIP"
	sed -e "s/__LOCAL_DNS__/$NODELOCAL_IP/g" -e "s/__UPSTREAM__/$upstream/g" "$dir/node-local-dns.yaml" |
		kc apply -f - >&2
	if ! kc -n kube-system rollout status ds/node-local-dns --timeout=5m >&2; then
		kc -n kube-system logs -l k8s-app=node-local-dns --tail=5 --prefix >&2 || true
		die "DaemonSet kube-system/node-local-dns did not roll out (its logs above; \"Unknown directive 'bind'\": hack/k8s/build.sh coredns)"
	fi
}
