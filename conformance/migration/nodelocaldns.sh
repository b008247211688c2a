# shellcheck shell=bash
# shellcheck disable=SC2016 # the loops' lines are bash for the pod, $ and all
# The node variant nodelocaldns's load (variants.sh; sourced, not run):
# on each node, two client pods whose counts join the phase line.
#
#   nodelocal-dns     a pod's own resolver (glibc's, reading the
#                     /etc/resolv.conf the kubelet wrote, which must name
#                     169.254.20.10 alone) resolving a pod-IP name of the
#                     cluster 5 times a second. The names turn over a
#                     range of 200, longer than the cache keeps an answer
#                     (30 s), so every query goes on from the node's cache
#                     over TCP to kube-dns-upstream's ClusterIP: through
#                     the proxy being swapped. A query counts as failed
#                     unless it returns the name's address.
#   nodelocal-intact  the node's own `ip` and `iptables-save` (nsenter),
#                     every 2 s: the nodelocaldns interface still holds
#                     169.254.20.10 and every one of node-cache's rules is
#                     still there. A check that finds either gone fails.
#
# The common load's dns= counts query kube-dns's ClusterIP directly, as
# before, so both paths are counted.

# shellcheck source=hack/cluster/nodelocaldns.sh
. "$REPO/hack/cluster/nodelocaldns.sh"

# nodelocaldns_dns_spec: the nodelocal-dns client's pod spec lines.
nodelocaldns_dns_spec() {
	bash_client_spec dns pod "$(
		cat <<SH
servers=""
while read -r k v _; do [[ \$k == nameserver ]] && servers+="\$v "; done </etc/resolv.conf
if [[ \$servers != "$NODELOCAL_IP " ]]; then
  echo "nodelocal-dns: /etc/resolv.conf names \${servers:-no nameserver}, want $NODELOCAL_IP alone" >&2
  exit 1
fi
SH
		client_loop -clock epoch -pre 'i=$((n % 200 + 1))' \
			-do '# In the background: the trap runs at once, not after a lookup.' \
			-do 'getent ahostsv4 "10-244-250-$i.default.pod.cluster.local." >/tmp/got & wait $!' \
			-do 'read -r got _ </tmp/got || got=""' \
			-ok '[[ $got == "10.244.250.$i" ]]' \
			-fail "10-244-250-\$i: got '\$got'"
	)"
}

# nodelocaldns_intact_spec: the nodelocal-intact check's pod spec lines.
nodelocaldns_intact_spec() {
	bash_client_spec check node "$(
		echo "want=\"1 $(nodelocaldns_rule_count)\""
		client_loop -every 2 \
			-do "got=\$(nsenter -t 1 -m -n -- sh -c \"ip -o -4 addr show dev $NODELOCAL_IF | grep -c ' $NODELOCAL_IP/32 '; iptables-save | grep -c '$NODELOCAL_COMMENT'\" 2>&1 | tr '\\n' ' ')" \
			-bad '[[ $got != "$want " ]]' \
			-fail 'address and rules: $got(want $want)'
	)"
}

# nodelocaldns_start_load: both clients on every node.
nodelocaldns_start_load() {
	local i node
	for ((i = 1; i <= NODES; i++)); do
		node=$(node_name "$i")
		extra_pod "nodelocal-dns-$node" "$node" "$(nodelocaldns_dns_spec)"
		extra_pod "nodelocal-intact-$node" "$node" "$(nodelocaldns_intact_spec)"
	done
}
