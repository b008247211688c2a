# shellcheck shell=bash
# The node variant metallb-l2's load (sourced by variants.sh): MetalLB in L2
# mode (hack/cluster/metallb.sh) announcing two LoadBalancer Services of
# the common backends, one eTP=Cluster (10.88.0.200, tag lb-l2) and one
# eTP=Local (10.88.0.201, tag lb-l2-local); the lab host, an outside client
# on the nodes' bridge, calls each through the phase. After each hand-over
# an ARP check from the bridge: every node holds both addresses on
# kube-ipvs0, so only strictARP (arp_ignore=1, arp_announce=2) keeps all but
# MetalLB's announcing node from answering. Its words on the phase line:
# lb-l2-arp-macs=<the most MACs that answered for one address> and
# lb-l2-arp-from-announcer=<addresses answered by their announcing node
# alone>/<addresses>; the replies themselves go to the report.

LB_L2_CLUSTER_IP=10.88.0.200
LB_L2_LOCAL_IP=10.88.0.201

# lb_l2_workload: MetalLB, then the two Services, once each has its address.
lb_l2_workload() {
	local s
	"$CLUSTER_DIR/metallb.sh" up
	kc apply -f - >&2 <<YAML
apiVersion: v1
kind: Service
metadata:
  name: web-lb
  namespace: migration
  annotations: {metallb.io/loadBalancerIPs: $LB_L2_CLUSTER_IP}
spec:
  type: LoadBalancer
  selector: {app: backend}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata:
  name: web-lb-local
  namespace: migration
  annotations: {metallb.io/loadBalancerIPs: $LB_L2_LOCAL_IP}
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  selector: {app: backend}
  ports: [{name: http, port: 80, targetPort: 8080}]
YAML
	for s in web-lb web-lb-local; do
		kc -n migration wait --for=jsonpath='{.status.loadBalancer.ingress[0].ip}' "svc/$s" --timeout=3m >&2 ||
			die "service migration/$s: MetalLB gave it no address in 3 minutes (kubectl -n metallb-system logs deploy/controller)"
	done
	echo "metallb: $("$CLUSTER_DIR/metallb.sh" version) L2, kube-proxy's ConfigMap strictARP=$(kc -n kube-system get configmap kube-proxy \
		-o jsonpath='{.data.config\.conf}' | awk '$1 == "strictARP:" { print $2 }'), web-lb (eTP Cluster) $LB_L2_CLUSTER_IP, web-lb-local (eTP Local) $LB_L2_LOCAL_IP" >>"$OUT/report.txt"
	"$CLUSTER_DIR/metallb.sh" arp "$LB_L2_CLUSTER_IP" "$LB_L2_LOCAL_IP" | sed 's/^/before-swap arp: /' >>"$OUT/report.txt"
}

# lb_l2_start_load <phase>: one host client per Service (clients.sh).
lb_l2_start_load() {
	local phase=$1 tag ip
	for tag in lb-l2 lb-l2-local; do
		ip=$LB_L2_CLUSTER_IP
		[[ $tag == lb-l2-local ]] && ip=$LB_L2_LOCAL_IP
		host_client "$phase" "$tag" lab "http://$ip:80/"
	done
}

# lb_l2_arp_words <phase>: the ARP check's words for the phase line; its
# replies go to the report.
lb_l2_arp_words() {
	local phase=$1 lines l
	lines=$("$CLUSTER_DIR/metallb.sh" arp "$LB_L2_CLUSTER_IP" "$LB_L2_LOCAL_IP")
	while IFS= read -r l; do echo "after-$phase arp: $l"; done <<<"$lines" >>"$OUT/report.txt"
	awk '{ n++; split($2, m, "="); if (m[2] > most) most = m[2]
		split($4, a, "="); if (m[2] == 1 && $3 ~ ("=" a[2] "$")) alone++ }
		END { printf " lb-l2-arp-macs=%d lb-l2-arp-from-announcer=%d/%d", most, alone, n }' <<<"$lines"
}
