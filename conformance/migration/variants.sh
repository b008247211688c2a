# shellcheck shell=bash
# The migration run's load for each node variant (hack/cluster/variant.sh),
# sourced by conformance/migrate.sh beside its common load. Each extra
# client's counts go to $OUT/<phase>.x-<tag>-<name>.log and join the phase
# line as <tag>-requests=N <tag>-failed=N. The clients are built from
# clients.sh's pieces (the pods, the bash loop, the lab host's clients).
#
#   no-cluster-cidr   a one-replica backend pinned to each node behind its
#                     own ClusterIP; on each node a hostNetwork `load client`
#                     calling the ClusterIP of the other node's backend
#                     (tag hostnet), and the node's own curl (nsenter into
#                     the node) of the `kubernetes` ClusterIP, whose one
#                     endpoint is the API server off the nodes (tag node-curl)
#   forward-drop,     a hostNetwork `load serve` on node-1 behind a ClusterIP
#   forward-drop-nft  and a NodePort (30082); the lab host calls that
#                     NodePort on every other node (tag np-hostnet) and a pod
#                     on every other node calls the ClusterIP (tag ci-hostnet)
#   nodelocaldns      on each node a pod resolving through its
#                     resolv.conf, i.e. the node's cache on 169.254.20.10
#                     (tag nodelocal-dns), and a check that the cache's
#                     address and NOTRACK rules stay (tag nodelocal-intact):
#                     migration/nodelocaldns.sh
#   flannel           the same pinned backends as no-cluster-cidr; on each
#                     node a pod calling the ClusterIP of the other node's
#                     backend, so every request crosses flannel.1's VXLAN
#                     (tag vxlan), and a hostNetwork client doing the same
#                     from the node's own address (tag hostnet)
#   metallb-l2        MetalLB in L2 mode and two LoadBalancer Services the
#                     lab host calls by their announced addresses (tags
#                     lb-l2, lb-l2-local), with an ARP check after each
#                     hand-over (metallb-l2.sh)
#   default, legacy   nothing beyond the common load

# shellcheck source=conformance/migration/clients.sh
. "$(dirname "${BASH_SOURCE[0]}")/clients.sh"
# shellcheck source=conformance/migration/nodelocaldns.sh
. "$(dirname "${BASH_SOURCE[0]}")/nodelocaldns.sh"
# shellcheck source=conformance/migration/metallb-l2.sh
. "$(dirname "${BASH_SOURCE[0]}")/metallb-l2.sh"

# serve_workload <name> <node> [host]: a one-replica `load serve` pinned to
# node, in a pod's network or (host) the node's, behind a ClusterIP
# Service of the same name.
serve_workload() {
	local name=$1 node=$2 net=${3:-}
	cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: $name, namespace: migration}
spec:
  replicas: 1
  selector: {matchLabels: {app: $name}}
  template:
    metadata: {labels: {app: $name, load: serve}}
    spec:
      nodeSelector: {kubernetes.io/hostname: $node}
YAML
	[[ $net == host ]] && echo "      hostNetwork: true"
	cat <<YAML
      terminationGracePeriodSeconds: 1
      containers:
      - name: serve
        image: localhost/kip-load:lab
        imagePullPolicy: IfNotPresent
        args: [serve]
        readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 2}
---
apiVersion: v1
kind: Service
metadata: {name: $name, namespace: migration}
spec:
  selector: {app: $name}
  ports: [{name: http, port: 80, targetPort: 8080}]
YAML
}

# variant_workload: the variant's backends and Services.
variant_workload() {
	local i node
	case $NODE_VARIANT in
	no-cluster-cidr | flannel)
		for ((i = 1; i <= NODES; i++)); do
			node=$(node_name "$i")
			serve_workload "pinned-$node" "$node" | kc apply -f - >&2
			kc -n migration rollout status "deploy/pinned-$node" --timeout=5m >&2
		done
		;;
	forward-drop | forward-drop-nft)
		{
			serve_workload hostsrv "$(node_name 1)" host
			cat <<YAML
---
apiVersion: v1
kind: Service
metadata: {name: hostsrv-np, namespace: migration}
spec:
  type: NodePort
  selector: {app: hostsrv}
  ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30082}]
YAML
		} | kc apply -f - >&2
		kc -n migration rollout status deploy/hostsrv --timeout=5m >&2
		;;
	nodelocaldns) kc -n kube-system rollout status ds/node-local-dns --timeout=5m >&2 ;;
	metallb-l2) lb_l2_workload ;;
	esac
}

# node_curl_spec <url>: a pod spec whose container runs the node's own curl
# (nsenter into the node's mount and network namespaces) of url, 5 a
# second.
node_curl_spec() {
	bash_client_spec curl node "$(client_loop -clock date \
		-ok "nsenter -t 1 -m -n -- curl -sk -o /dev/null --max-time 10 -w '%{http_code}' \"$1\" | grep -q '^200\$'" \
		-fail failed)"
}

# variant_start_load <phase>: the variant's extra clients.
variant_start_load() {
	local phase=$1 i j node other ip p
	case $NODE_VARIANT in
	no-cluster-cidr)
		for ((i = 1; i <= NODES; i++)); do
			node=$(node_name "$i")
			j=$((i % NODES + 1))
			other=$(node_name "$j")
			ip=$(kc -n migration get svc "pinned-$other" -o jsonpath='{.spec.clusterIP}')
			extra_pod "hostnet-$node" "$node" "$(load_client_spec host "http://$ip:80/")"
			ip=$(kc get svc kubernetes -o jsonpath='{.spec.clusterIP}')
			extra_pod "node-curl-$node" "$node" "$(node_curl_spec "https://$ip:443/readyz")"
		done
		;;
	flannel)
		# 2 requests a second, not 6: every one crosses VXLAN, which the
		# TCG VMs encapsulate in software, and at 6 both VMs ran at a load
		# average of 18 to 36 on 2 vCPUs, where pod clients waited seconds
		# between their own connect and their own write (at 2 the load was
		# only a little lower: these clients are not most of it). A path cut
		# for half a second still fails a request.
		for ((i = 1; i <= NODES; i++)); do
			node=$(node_name "$i")
			other=$(node_name $((i % NODES + 1)))
			ip=$(kc -n migration get svc "pinned-$other" -o jsonpath='{.spec.clusterIP}')
			extra_pod "vxlan-$node" "$node" "$(load_client_spec pod "http://$ip:80/" 2)"
			extra_pod "hostnet-$node" "$node" "$(load_client_spec host "http://$ip:80/" 2)"
		done
		;;
	forward-drop | forward-drop-nft)
		ip=$(kc -n migration get svc hostsrv -o jsonpath='{.spec.clusterIP}')
		for ((i = 2; i <= NODES; i++)); do
			node=$(node_name "$i")
			extra_pod "ci-hostnet-$node" "$node" "$(load_client_spec pod "http://$ip:80/")"
			host_client "$phase" np-hostnet "$i" "http://$(node_ip4 "$i"):30082/"
		done
		;;
	nodelocaldns) nodelocaldns_start_load ;;
	metallb-l2)
		lb_l2_start_load "$phase"
		return 0
		;;
	*) return 0 ;;
	esac
	kc -n migration wait --for=condition=Ready pod -l extra=1 --timeout=5m >&2
	for p in $(pods_of migration extra=1); do
		kc -n migration logs -f "$p" >"$OUT/$phase.x-${p%-node-*}-node-${p##*-node-}.log" 2>"$OUT/$phase.x-$p.err" &
		echo $! >>"$OUT/$phase.followers"
	done
}

# variant_stop_pods: deletes the extra client pods (they print their counts).
variant_stop_pods() {
	kc -n migration delete pod -l extra=1 --wait=true >&2
}

# variant_counts <phase>: <tag>-requests=N <tag>-failed=N per tag of the
# phase's extra logs.
variant_counts() {
	local phase=$1 f tag tags=() t
	for f in "$OUT/$phase".x-*.log; do
		[[ -e $f ]] || continue
		tag=${f#"$OUT/$phase".x-}
		tag=${tag%-node-*}
		[[ " ${tags[*]} " == *" $tag "* ]] || tags+=("$tag")
	done
	for t in "${tags[@]}"; do
		for f in "$OUT/$phase.x-$t"-node-*.log; do
			grep '^load: requests=' "$f" | tail -n 1 || die "$f: no final counts (see ${f%.log}.err)"
		done | awk -v t="$t" '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); s[kv[1]] += kv[2] } }
			END { printf " %s-requests=%d %s-failed=%d", t, s["requests"], t, s["failed"] }'
	done
	if [[ $NODE_VARIANT == metallb-l2 ]]; then lb_l2_arp_words "$phase"; fi
	echo
}
