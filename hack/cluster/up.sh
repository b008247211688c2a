#!/usr/bin/env bash
# Brings up the lab cluster (`make cluster`): etcd, kube-apiserver,
# kube-controller-manager and kube-scheduler on the host inside the network
# namespace "kiplab", and NODES qemu (TCG) VMs running containerd and the
# kubelet, bridged into that namespace; then CoreDNS and our proxy, deployed
# with `kubectl apply -k hack/cluster/overlay` (deploy/base, only the image,
# cluster CIDR and API server address set) as users deploy it.
#
#   hack/cluster/up.sh              # NODES=1 FAMILY=ipv4 by default
#   NODES=2 FAMILY=dual hack/cluster/up.sh
#   KIP_NO_PROXY=1 hack/cluster/up.sh   # everything but the proxy
#   KIP_KUBE_PROXY=upstream hack/cluster/up.sh
#                                   # upstream kube-proxy v1.36.3 in IPVS mode instead,
#                                   # deployed by kubeadm's addon phase (the swap's start)
#   KIP_NODE_VARIANT=forward-drop KIP_KUBE_PROXY=upstream NODES=2 hack/cluster/up.sh
#                                   # nodes as some users have them (variant.sh)
#
# Afterwards: hack/cluster/kubectl.sh get nodes -o wide (kubectl as admin
# inside the namespace), hack/cluster/down.sh to stop it. State, logs and
# the admin kubeconfig are under .cache/cluster/run (see hack/cluster/README.md).
set -euo pipefail
shopt -s inherit_errexit
# shellcheck source=hack/cluster/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=hack/cluster/pki.sh
. "$CLUSTER_DIR/pki.sh"

[[ $(id -u) == 0 ]] || die "needs root (network namespace, taps, mkfs)"
[[ $NODES =~ ^[1-9]$ ]] || die "NODES=$NODES: want 1 to 9"
if ! [[ $ZONES =~ ^[1-9]$ ]] || ((ZONES > NODES)); then die "ZONES=$ZONES: want 1 to NODES ($NODES)"; fi
family_values x x >/dev/null
"$CLUSTER_DIR/variant.sh" check
if ip netns list | grep -qw "$NETNS"; then
	die "network namespace $NETNS exists: a cluster is up (hack/cluster/down.sh first)"
fi

t0=$(date +%s)
step() { log "$* (+$(($(date +%s) - t0))s)"; }

# --- inputs -----------------------------------------------------------------

step "host packages, binaries and images (cached)"
ensure_host_packages
"$REPO/hack/k8s/build.sh" etcd kube-apiserver kubelet kube-controller-manager kube-scheduler kubectl >/dev/null
NODE_IMG=$("$CLUSTER_DIR/node-image.sh")
IMAGES=$("$CLUSTER_DIR/images.sh" all)
if [[ $KUBE_PROXY == upstream ]]; then
	"$REPO/hack/k8s/build.sh" kubeadm kube-proxy >/dev/null
	"$CLUSTER_DIR/images.sh" kube-proxy >/dev/null
fi
# flannel's image, on flannel clusters' nodes only (flannel.sh).
FLANNEL_TAR=
if [[ $NODE_VARIANT == flannel ]]; then FLANNEL_TAR=$("$CLUSTER_DIR/flannel.sh" image); fi

rm -rf "$RUN"
mkdir -p "$RUN/logs" "$RUN/pids" "$RUN/etcd"
echo "NODES=$NODES ZONES=$ZONES FAMILY=$FAMILY KUBE_PROXY=$KUBE_PROXY NODE_VARIANT=$NODE_VARIANT" >"$RUN/cluster.env"
make_pki "$RUN/pki" "$NODES"
API_URL=https://$GW4:$API_PORT
kubeconfig "$RUN/admin.kubeconfig" "$API_URL" admin "$RUN/pki"
kubeconfig "$RUN/controller-manager.kubeconfig" "$API_URL" controller-manager "$RUN/pki"
kubeconfig "$RUN/scheduler.kubeconfig" "$API_URL" scheduler "$RUN/pki"

# --- network ----------------------------------------------------------------

step "network namespace $NETNS: bridge $BRIDGE ($GW4/24, $GW6/64), one tap per node"
ip netns add "$NETNS"
ip -n "$NETNS" link set lo up
ip -n "$NETNS" link add "$BRIDGE" type bridge
ip -n "$NETNS" addr add "$GW4/24" dev "$BRIDGE"
ip -n "$NETNS" addr add "$GW6/64" dev "$BRIDGE" nodad
ip -n "$NETNS" link set "$BRIDGE" up
in_ns sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
for ((i = 1; i <= NODES; i++)); do
	ip -n "$NETNS" tuntap add "kiptap$i" mode tap
	ip -n "$NETNS" link set "kiptap$i" master "$BRIDGE" up
done

# --- control plane ----------------------------------------------------------

P=$RUN/pki
SVC_CIDR=$(family_values "$SVC_CIDR4" "$SVC_CIDR6")
POD_CIDR=$(family_values "$POD_CIDR4" "$POD_CIDR6")
case $FAMILY in ipv6) ADVERTISE=$GW6 ;; *) ADVERTISE=$GW4 ;; esac

step "etcd and kube-apiserver"
start_daemon etcd "$K8S_BIN/etcd" --data-dir="$RUN/etcd" --listen-client-url=http://127.0.0.1:2379 \
	--listen-peer-url=http://127.0.0.1:2380 --unsafe-no-fsync
start_daemon kube-apiserver "$K8S_BIN/kube-apiserver" \
	--etcd-servers=http://127.0.0.1:2379 --bind-address=:: --secure-port=$API_PORT \
	--advertise-address="$ADVERTISE" --allow-privileged=true \
	--tls-cert-file="$P/apiserver.crt" --tls-private-key-file="$P/apiserver.key" \
	--client-ca-file="$P/ca.crt" --kubelet-client-certificate="$P/apiserver-kubelet-client.crt" \
	--kubelet-client-key="$P/apiserver-kubelet-client.key" \
	--kubelet-preferred-address-types=InternalIP,Hostname \
	--service-cluster-ip-range="$SVC_CIDR" --service-node-port-range=30000-32767 \
	--service-account-issuer=https://kubernetes.default.svc.cluster.local \
	--service-account-key-file="$P/sa.pub" --service-account-signing-key-file="$P/sa.key" \
	--authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
	--cert-dir="$RUN/apiserver-certs" --profiling=false --v=1
wait_for 120 "kube-apiserver /readyz" kc get --raw /readyz

# A /24 or /64 per node; the per-family flags are refused on single-stack.
case $FAMILY in
ipv4) CIDR_MASKS=(--node-cidr-mask-size=24) ;;
ipv6) CIDR_MASKS=(--node-cidr-mask-size=64) ;;
dual) CIDR_MASKS=(--node-cidr-mask-size-ipv4=24 --node-cidr-mask-size-ipv6=64) ;;
esac
step "kube-controller-manager (--allocate-node-cidrs $POD_CIDR) and kube-scheduler"
start_daemon kube-controller-manager "$K8S_BIN/kube-controller-manager" \
	--kubeconfig="$RUN/controller-manager.kubeconfig" \
	--authentication-kubeconfig="$RUN/controller-manager.kubeconfig" \
	--authorization-kubeconfig="$RUN/controller-manager.kubeconfig" \
	--bind-address=127.0.0.1 --leader-elect=false --use-service-account-credentials=true \
	--allocate-node-cidrs=true --cluster-cidr="$POD_CIDR" \
	"${CIDR_MASKS[@]}" \
	--service-cluster-ip-range="$SVC_CIDR" \
	--root-ca-file="$P/ca.crt" --service-account-private-key-file="$P/sa.key" \
	--cluster-signing-cert-file="$P/ca.crt" --cluster-signing-key-file="$P/ca.key" \
	--controllers='*,bootstrapsigner,tokencleaner' --v=1
start_daemon kube-scheduler "$K8S_BIN/kube-scheduler" \
	--kubeconfig="$RUN/scheduler.kubeconfig" \
	--authentication-kubeconfig="$RUN/scheduler.kubeconfig" \
	--authorization-kubeconfig="$RUN/scheduler.kubeconfig" \
	--bind-address=127.0.0.1 --leader-elect=false --v=1

# --- nodes ------------------------------------------------------------------

# config_disk <i>: the node's config disk (ext4, label KIPCFG): node.env,
# kubelet config and kubeconfig, certificates, the kubelet, the images.
config_disk() {
	local i=$1 name dir addrs gws ips
	name=$(node_name "$i")
	dir=$RUN/nodes/$name
	mkdir -p "$dir/root/pki" "$dir/root/bin" "$dir/root/images/early" "$dir/root/images/late"
	addrs="$(node_ip4 "$i")/24 $(node_ip6 "$i")/64"
	gws="$GW4 $GW6"
	ips=$(family_values "$(node_ip4 "$i")" "$(node_ip6 "$i")")
	cat >"$dir/root/node.env" <<ENV
NODE_NAME=$name
NODE_ADDRS="$addrs"
NODE_GATEWAYS="$gws"
KUBELET_NODE_IP=$ips
KUBELET_V=$KUBELET_V
APISERVER=$API_URL
ENV
	cp "$P/ca.crt" "$dir/root/pki/ca.crt"
	cp "$P/kubelet-$name.crt" "$dir/root/pki/kubelet.crt"
	cp "$P/kubelet-$name.key" "$dir/root/pki/kubelet.key"
	cp "$P/kubelet-serving-$name.crt" "$dir/root/pki/serving.crt"
	cp "$P/kubelet-serving-$name.key" "$dir/root/pki/serving.key"
	cat >"$dir/root/kubelet.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster: {server: $API_URL, certificate-authority: /kip/pki/ca.crt}
users:
- name: kubelet
  user: {client-certificate: /kip/pki/kubelet.crt, client-key: /kip/pki/kubelet.key}
contexts:
- name: lab
  context: {cluster: lab, user: kubelet}
current-context: lab
KC
	local dns
	dns=$(family_values "$DNS4" "$DNS6" | sed 's/,/, /')
	cat >"$dir/root/kubelet.yaml" <<CFG
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroupfs: containerd 1.6 does not implement the CRI RuntimeConfig call
# that lets the kubelet learn the driver from the runtime.
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: /kip/pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: /kip/pki/serving.crt
tlsPrivateKeyFile: /kip/pki/serving.key
clusterDomain: cluster.local
clusterDNS: [$dns]
resolvConf: /etc/resolv.conf
failSwapOn: false
# A small disk in a VM: no disk-pressure evictions or image GC in a test run.
evictionHard: {memory.available: 100Mi, nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
CFG
	cp "$K8S_BIN/kubelet" "$dir/root/bin/kubelet"
	# Early: imported before the kubelet starts; late: while it registers.
	local img
	for img in "$IMAGES"/*.tar; do
		case $(basename "$img") in
		pause.tar | kube-ipvs-proxy.tar | coredns.tar) cp "$img" "$dir/root/images/early/" ;;
		kube-proxy.tar) if [[ $KUBE_PROXY == upstream ]]; then cp "$img" "$dir/root/images/early/"; fi ;;
		*) cp "$img" "$dir/root/images/late/" ;;
		esac
	done
	[[ -z $FLANNEL_TAR ]] || cp "$FLANNEL_TAR" "$dir/root/images/early/"
	local mb
	mb=$(($(du -sm "$dir/root" | cut -f1) + 64))
	truncate -s "${mb}M" "$dir/config.img"
	mkfs.ext4 -q -L KIPCFG -d "$dir/root" "$dir/config.img"
	rm -rf "$dir/root"
}

boot_node() {
	local i=$1 name
	name=$(node_name "$i")
	start_daemon "qemu-$name" qemu-system-x86_64 -name "$name" \
		-accel tcg,thread=multi -cpu max -m "$NODE_MEM" -smp "$NODE_SMP" \
		-kernel "$NODE_IMG/vmlinuz" -initrd "$NODE_IMG/initrd.img" \
		-append "root=/dev/vda rw console=ttyS0 net.ifnames=0 panic=10 systemd.show_status=auto" \
		-drive "file=$NODE_IMG/root.img,format=raw,if=virtio,snapshot=on" \
		-drive "file=$RUN/nodes/$name/config.img,format=raw,if=virtio,readonly=on" \
		-netdev "tap,id=net0,ifname=kiptap$i,script=no,downscript=no" \
		-device "virtio-net-pci,netdev=net0,mac=52:54:00:88:00:$(printf %02x $((10 + i)))" \
		-serial "file:$RUN/logs/$name-console.log" -serial "file:$RUN/logs/$name-kubelet.log" \
		-display none -no-reboot
}

for ((i = 1; i <= NODES; i++)); do
	step "config disk and boot of $(node_name "$i")"
	config_disk "$i"
	boot_node "$i"
done

node_registered() { kc get node "$1" -o jsonpath='{.spec.podCIDRs}' | grep -q .; }
for ((i = 1; i <= NODES; i++)); do
	name=$(node_name "$i")
	wait_for 900 "$name to register and get podCIDRs (console: $RUN/logs/$name-console.log)" \
		node_registered "$name"
	# Under flannel, pods on different nodes meet through its VXLAN
	# device, not through the namespace.
	[[ $NODE_VARIANT == flannel ]] && continue
	for cidr in $(kc get node "$name" -o jsonpath='{.spec.podCIDRs[*]}'); do
		if [[ $cidr == *:* ]]; then via=$(node_ip6 "$i"); else via=$(node_ip4 "$i"); fi
		ip -n "$NETNS" route replace "$cidr" via "$via"
		step "$name: podCIDR $cidr routed via $via"
	done
done
# Zones: node i in zone-<((i-1) mod ZONES)+1>, set before the proxy starts so
# its first sync already knows its zone.
for ((i = 1; i <= NODES; i++)); do
	name=$(node_name "$i")
	kc label --overwrite node "$name" "topology.kubernetes.io/zone=zone-$(((i - 1) % ZONES + 1))" >/dev/null
done
step "zones: $(kc get nodes -L topology.kubernetes.io/zone --no-headers | awk '{print $1"="$NF}' | paste -sd' ')"
node_ready() { kc wait --for=condition=Ready "node/$1" --timeout=5s; }
for ((i = 1; i <= NODES; i++)); do
	wait_for 900 "$(node_name "$i") Ready" node_ready "$(node_name "$i")"
done
step "nodes Ready"
kc get nodes -o wide >&2
if [[ $NODE_VARIANT != default ]]; then
	step "node variant $NODE_VARIANT"
	"$CLUSTER_DIR/variant.sh" nodes
fi

# --- add-ons ----------------------------------------------------------------

"$CLUSTER_DIR/addons.sh"

# The test images are imported after the kubelet starts (kip-images-late);
# the kubelet lists them in the node's status once they are there.
has_test_images() {
	local names t
	names=$(kc get node "$1" -o jsonpath='{.status.images[*].names}')
	for t in agnhost:2.63.0 busybox:1.37.0-1 glibc-dns-testing:2.0.0 regression-issue-74839:1.4; do
		[[ $names == *"e2e-test-images/$t"* ]] || return 1
	done
}
for ((i = 1; i <= NODES; i++)); do
	wait_for 900 "$(node_name "$i")'s test images (kip-images-late)" has_test_images "$(node_name "$i")"
done
step "cluster up: hack/cluster/kubectl.sh get nodes; hack/cluster/down.sh to stop it"
