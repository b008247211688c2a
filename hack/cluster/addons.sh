#!/usr/bin/env bash
# The lab cluster's add-ons, applied by up.sh once the nodes are Ready (and
# safe to re-run on a running cluster): CoreDNS (manifests/coredns.yaml,
# its Service in the cluster's families) and our proxy with
# `kubectl apply -k hack/cluster/overlay`, as users deploy it; or, on a
# cluster brought up with KIP_KUBE_PROXY=upstream, upstream kube-proxy in
# IPVS mode deployed by `kubeadm init phase addon kube-proxy`, as kubeadm
# users have it. Waits for both to roll out. KIP_NO_PROXY=1: CoreDNS only.
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

# kubeadm_kube_proxy: upstream kube-proxy in IPVS mode, deployed by kubeadm's
# own addon phase as `kubeadm init` deploys it: ServiceAccount, the
# ClusterRoleBinding to system:node-proxier, ConfigMap kube-proxy
# (config.conf with mode: ipvs, kubeconfig.conf) and the DaemonSet.
kubeadm_kube_proxy() {
	local cfg=$RUN/kubeadm.yaml endpoint advertise pod_subnet ipvs
	case $FAMILY in
	ipv6) endpoint="[$GW6]:$API_PORT" advertise=$GW6 ;;
	*) endpoint="$GW4:$API_PORT" advertise=$GW4 ;;
	esac
	# Without networking.podSubnet kubeadm writes no clusterCIDR into
	# kube-proxy's ConfigMap, as on clusters made without --pod-network-cidr.
	pod_subnet="  podSubnet: \"$(family_values "$POD_CIDR4" "$POD_CIDR6")\""
	[[ ${NODE_VARIANT:-default} == no-cluster-cidr ]] && pod_subnet=""
	# MetalLB's guide for IPVS mode: strictARP in kube-proxy's config.
	ipvs=""
	[[ ${NODE_VARIANT:-default} == metallb-l2 ]] && ipvs=$'ipvs:\n  strictARP: true'
	cat >"$cfg" <<CFG
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: "$advertise"
  bindPort: $API_PORT
nodeRegistration:
  criSocket: unix:///run/containerd/containerd.sock
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: $K8S_VERSION
imageRepository: registry.k8s.io
controlPlaneEndpoint: "$endpoint"
networking:
$pod_subnet
  serviceSubnet: "$(family_values "$SVC_CIDR4" "$SVC_CIDR6")"
---
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: ipvs
$ipvs
CFG
	log "kube-proxy $K8S_VERSION (IPVS mode): kubeadm init phase addon kube-proxy"
	in_ns "$K8S_BIN/kubeadm" init phase addon kube-proxy --config "$cfg" \
		--kubeconfig "$RUN/admin.kubeconfig" >&2
	kc -n kube-system rollout status ds/kube-proxy --timeout=10m >&2
}

if [[ ${KUBE_PROXY:-ours} == upstream ]]; then
	kubeadm_kube_proxy
elif [[ -z ${KIP_NO_PROXY:-} ]]; then
	log "kube-ipvs-proxy: kubectl apply -k hack/cluster/overlay"
	kc apply -k "$CLUSTER_DIR/overlay" >&2
	kc -n kube-system rollout status ds/kube-ipvs-proxy --timeout=10m >&2
fi
# flannel's flanneld reaches the API server through the kubernetes
# ClusterIP: after the proxy, before anything needs a pod network.
[[ ${NODE_VARIANT:-default} != flannel ]] || "$CLUSTER_DIR/flannel.sh" deploy
kc -n kube-system rollout status deploy/coredns --timeout=10m >&2
kc get pods -A -o wide >&2
