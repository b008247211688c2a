//go:build integration

package traffic

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/apiconv"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// TestOtherNodesAddressAsExternalIPKeepsNodesTalking: a Service lists
// node-b's InternalIP as an external IP, next to an ordinary one. node-a
// serves node-b's address unbound (a virtual server on it, nothing on
// kube-ipvs0), binds the ordinary one, and node-b's own connections to
// node-a's pod, straight or through node-a's eTP=Cluster NodePort, get
// their replies: the replies to node-b's address leave node-a.
//
// The second case is kube-proxy's behaviour, reproduced by leaving
// node-b's Node out of the engine: node-b's address is then an ordinary
// external IP, bound on node-a's kube-ipvs0 as a /32, and every
// connection from node-b's address to node-a is lost, which is how a
// cluster's nodes were cut off from each other's pods: node-a takes the
// address for its own, so what comes from it is a martian to node-a
// (node-b's ARP requests for node-a go unanswered: the case logs node-b's
// neighbour entry, FAILED) and replies to it would be delivered locally.
func TestOtherNodesAddressAsExternalIPKeepsNodesTalking(t *testing.T) {
	nodeBAddr := nodeIP4(2)
	ordinary := netip.MustParseAddr("198.51.100.43") // the client routes 198.51.100.0/24 via node-a
	for _, tc := range []struct {
		name       string
		nodeBKnown bool // node-b's Node is among the engine's nodes
	}{
		{"node-b's Node known: its address is served unbound and node-b reaches node-a's pod", true},
		{"node-b's Node unknown (kube-proxy): its address is bound and node-b's connections are lost", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLab(t)
			nodeB := l.node("node-b")
			// The lab gave the engine every node; node-b is given again
			// as the real mode gets it, a Node object through apiconv.
			l.engine.DeleteNode("node-b")
			if tc.nodeBKnown {
				l.upsertK8sNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b",
					Labels: map[string]string{policy.LabelTopologyZone: nodeB.zone, labelHostname: "node-b"}},
					Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
						{Type: corev1.NodeInternalIP, Address: nodeB.v4.String()},
						{Type: corev1.NodeInternalIP, Address: nodeB.v6.String()},
						{Type: corev1.NodeHostName, Address: "node-b"}}}})
			}
			key := l.nodeAddressService(nodeBAddr, ordinary)
			l.programNodeAddressPlan(tc.nodeBKnown)

			for _, vs := range []policy.VirtualServer{
				l.externalVirtualServer(key, nodeBAddr, policy.ProtocolTCP),
				l.externalVirtualServer(key, nodeBAddr, policy.ProtocolUDP),
			} {
				if vs.OnNodeAddress != tc.nodeBKnown {
					t.Errorf("plan: %s %s:%d onNodeAddress %v, want %v", vs.Protocol, vs.Address, vs.Port, vs.OnNodeAddress, tc.nodeBKnown)
				}
			}
			if got := ipvsPortsOn(t, nodeBAddr); len(got) != 2 { // TCP 80 and UDP 53, bound or not
				t.Errorf("IPVS virtual servers on %s: %v, want one per port (two)", nodeBAddr, got)
			}
			onDummy := kubeIPVS0Addrs(t)
			if bound := slices.Contains(onDummy, nodeBAddr); bound == tc.nodeBKnown {
				t.Errorf("kube-ipvs0 holds %v: node-b's address %s bound %v, want %v", onDummy, nodeBAddr, bound, !tc.nodeBKnown)
			}
			if !slices.Contains(onDummy, ordinary) {
				t.Errorf("kube-ipvs0 holds %v, want the ordinary external IP %s", onDummy, ordinary)
			}
			t.Logf("kube-ipvs0: %v", onDummy)

			// The control: the ordinary external IP serves the client either way.
			l.expectOnly(t, l.client, hostPort(ordinary, 80), TCP, 12, "pod-a1")
			l.expectOnly(t, l.client, hostPort(ordinary, 53), UDP, 12, "pod-a1")

			// node-b's own address sources these: straight to the pod (the
			// pod answers node-b's address) and to node-a's NodePort,
			// masqueraded (the pod answers node-a's address on its link,
			// and IPVS turns the reply back to node-b's): either reply
			// leaves node-a only if node-a does not hold node-b's address.
			pod := l.pod("pod-a1")
			for _, c := range []struct {
				proto Proto
				addr  string
				peer  string
			}{
				{TCP, hostPort(pod.v4, podTCPPort), nodeBAddr.String()},
				{UDP, hostPort(pod.v4, podUDPPort), nodeBAddr.String()},
				{TCP, hostPort(l.root.v4, 30091), podGW4(1).String()},
				{UDP, hostPort(l.root.v4, 30061), podGW4(1).String()},
			} {
				if !tc.nodeBKnown {
					l.expectLost(t, nodeB.host, c.proto, c.addr)
					continue
				}
				l.expectOnly(t, nodeB.host, c.addr, c.proto, nConns, "pod-a1")
				checkPeersProto(t, l.harness, nodeB.host, c.proto, c.addr, c.peer)
			}
			if !tc.nodeBKnown {
				l.logNeighbour(t, nodeB.host, l.root.v4)
			}
		})
	}
}

// upsertK8sNode gives the engine a Node object converted by apiconv.
func (l *lab) upsertK8sNode(obj *corev1.Node) {
	l.t.Helper()
	n, ws, err := apiconv.Node(obj)
	if err != nil || len(ws) > 0 {
		l.t.Fatalf("convert Node %s: %v (warnings %v)", obj.Name, err, ws)
	}
	l.engine.UpsertNode(n)
}

// nodeAddressService upserts default/node-address, converted by apiconv:
// an eTP=Cluster NodePort Service (TCP 80 and UDP 53 on node ports 30091
// and 30061) listing the given external IPs, whose one endpoint is
// pod-a1 on node-a.
func (l *lab) nodeAddressService(externalIPs ...netip.Addr) policy.ServiceKey {
	l.t.Helper()
	obj := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "node-address"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.17.1", ClusterIPs: []string{"10.96.17.1"},
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
			Ports: []corev1.ServicePort{
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30091},
				{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, NodePort: 30061}}}}
	for _, a := range externalIPs {
		obj.Spec.ExternalIPs = append(obj.Spec.ExternalIPs, a.String())
	}
	s, err := apiconv.Service(obj, "")
	if err != nil {
		l.t.Fatalf("convert Service %s: %v", obj.Name, err)
	}
	if ws := l.engine.UpsertService(s); len(ws) > 0 {
		l.t.Fatalf("Service %s: warnings %v", s.Key, ws)
	}
	l.setEndpoints(s.Key, l.ep("pod-a1"))
	return s.Key
}

// programNodeAddressPlan computes the plan and programs it with a full
// sync. The plan warns once (ExternalIPIsNodeAddress) when an external
// IP is a Node's address, and not otherwise.
func (l *lab) programNodeAddressPlan(nodeAddress bool) {
	l.t.Helper()
	plan, ws := l.engine.Compute()
	want := 0
	if nodeAddress {
		want = 1
	}
	if n := len(slices.DeleteFunc(slices.Clone(ws), func(w policy.Warning) bool { return w.Reason != policy.ReasonNodeAddress })); n != want || len(ws) != want {
		l.t.Errorf("plan warnings %v, want %d %s and no other", ws, want, policy.ReasonNodeAddress)
	}
	if err := l.dp.Resync(plan); err != nil {
		l.t.Fatalf("Resync: %v", err)
	}
	if f := l.dp.ServiceFailures(); len(f) > 0 {
		l.t.Fatalf("Services failing after the Resync: %v", f)
	}
}

// externalVirtualServer finds the planned ExternalIP virtual server of a
// service on addr.
func (l *lab) externalVirtualServer(key policy.ServiceKey, addr netip.Addr, proto policy.Protocol) policy.VirtualServer {
	l.t.Helper()
	sp, _ := l.engine.ComputeService(key)
	for _, vs := range sp.VirtualServers {
		if vs.Kind == policy.KindExternalIP && vs.Protocol == proto && vs.Address == addr {
			return vs
		}
	}
	l.t.Fatalf("no %s ExternalIP virtual server on %s for %s", proto, addr, key)
	return policy.VirtualServer{}
}

// ipvsPortsOn lists the IPVS virtual servers on addr as host:port.
func ipvsPortsOn(t *testing.T, addr netip.Addr) []string {
	t.Helper()
	return ipvsPortsWhere(t, func(a netip.Addr) bool { return a == addr })
}

// ipvsPortsWhere lists the IPVS virtual servers whose address is
// selected, as host:port.
func ipvsPortsWhere(t *testing.T, selected func(netip.Addr) bool) []string {
	t.Helper()
	h, err := ipvs.New("")
	if err != nil {
		t.Fatalf("ipvs handle: %v", err)
	}
	defer h.Close()
	svcs, err := h.GetServices()
	if err != nil {
		t.Fatalf("list IPVS virtual servers: %v", err)
	}
	var on []string
	for _, s := range svcs {
		if a, _ := netip.AddrFromSlice(s.Address); selected(a.Unmap()) {
			on = append(on, hostPort(a.Unmap(), int(s.Port)))
		}
	}
	return on
}

// kubeIPVS0Addrs lists the addresses bound on kube-ipvs0.
func kubeIPVS0Addrs(t *testing.T) []netip.Addr {
	t.Helper()
	link, err := netlink.LinkByName("kube-ipvs0")
	if err != nil {
		t.Fatalf("kube-ipvs0: %v", err)
	}
	bound, err := netlink.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatalf("kube-ipvs0's addresses: %v", err)
	}
	var out []netip.Addr
	for _, a := range bound {
		b, _ := netip.AddrFromSlice(a.IP)
		out = append(out, b.Unmap())
	}
	return out
}

// expectLost fails if an exchange from `from` to addr is answered: any
// failure, a timeout or a refusal, is what the case expects.
func (l *lab) expectLost(t *testing.T, from *host, proto Proto, addr string) {
	t.Helper()
	name, _, err := l.Exchange(from, proto, addr, l.dropFor)
	if err == nil {
		t.Errorf("%s %s from %s: answered by %s, want it lost", proto, addr, from, name)
		return
	}
	t.Logf("%s %s from %s: lost as expected (%v)", proto, addr, from, err)
}

// logNeighbour logs x's neighbour entry for addr (its ARP state), which
// says whether x could resolve addr's link address.
func (l *lab) logNeighbour(t *testing.T, x *host, addr netip.Addr) {
	t.Helper()
	nl := l.netlink(x)
	defer nl.Close()
	neighs, err := nl.NeighList(0, netlink.FAMILY_V4)
	if err != nil {
		t.Logf("%s's neighbours: %v", x, err)
		return
	}
	for _, n := range neighs {
		if a, _ := netip.AddrFromSlice(n.IP); a.Unmap() == addr {
			t.Logf("%s's neighbour %s: state %s, lladdr %q", x, addr, neighState(n.State), n.HardwareAddr)
			return
		}
	}
	t.Logf("%s has no neighbour entry for %s", x, addr)
}

func neighState(s int) string {
	for _, c := range []struct {
		bit  int
		name string
	}{{netlink.NUD_INCOMPLETE, "INCOMPLETE"}, {netlink.NUD_REACHABLE, "REACHABLE"}, {netlink.NUD_STALE, "STALE"},
		{netlink.NUD_DELAY, "DELAY"}, {netlink.NUD_PROBE, "PROBE"}, {netlink.NUD_FAILED, "FAILED"}, {netlink.NUD_PERMANENT, "PERMANENT"}} {
		if s&c.bit != 0 {
			return c.name
		}
	}
	return fmt.Sprintf("%#x", s)
}
