//go:build integration

package traffic

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/hostaddr"
)

// upsertWarned upserts a service whose plan is expected to carry
// warnings (setService refuses any), and its endpoints.
func (l *lab) upsertWarned(s *policy.Service, eps ...policy.Endpoint) {
	l.t.Helper()
	l.engine.UpsertService(s)
	l.setEndpoints(s.Key, eps...)
}

// resyncWarned is resync for a plan expected to carry warnings; it
// returns them.
func (l *lab) resyncWarned() []policy.Warning {
	l.t.Helper()
	plan, ws := l.engine.Compute()
	if err := l.dp.Resync(plan); err != nil {
		l.t.Fatalf("Resync: %v", err)
	}
	return ws
}

// dummyAddrs lists kube-ipvs0's addresses.
func dummyAddrs(t *testing.T) []netip.Addr {
	t.Helper()
	link, err := netlink.LinkByName("kube-ipvs0")
	if err != nil {
		t.Fatalf("kube-ipvs0: %v", err)
	}
	list, err := netlink.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatalf("addresses of kube-ipvs0: %v", err)
	}
	var out []netip.Addr
	for _, a := range list {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			out = append(out, ip.Unmap())
		}
	}
	return out
}

// TestExternalIPOnANodeAddressIsServedUnbound: as kube-proxy's IPVS
// mode, a Service whose external IPs name this node's address and another
// node's is served on them, on its ports, without binding them on
// kube-ipvs0: a client reaches the Service on the node's address, the
// node's other ports (a host port) and NodePorts keep answering (the
// address is in no VIP filter), the node still reaches the other node,
// and a foreign virtual server on the node address survives a resync.
func TestExternalIPOnANodeAddressIsServedUnbound(t *testing.T) {
	l := newLab(t)
	nodeB := l.node("node-b")
	l.serve(l.root, "node-a-host", 8181, 8181)
	l.serve(nodeB.host, "node-b-host", 8182, 8182)
	ipv, err := ipvs.New("")
	l.must(err)
	defer ipv.Close()
	foreign := &ipvs.Service{Address: net.IP(l.root.v4.AsSlice()), Protocol: unix.IPPROTO_TCP, Port: 22,
		AddressFamily: unix.AF_INET, SchedName: "rr", Netmask: 0xffffffff}
	l.must(ipv.NewService(foreign))
	defer func() { _ = ipv.DelService(foreign) }()

	web := service("web", []string{"10.96.12.1"}, nodePorts(30091, 30061))
	l.setService(web, l.ep("pod-b1"))
	ingress := service("ingress", []string{"10.96.12.2"}, func(s *policy.Service) {
		s.Key.Namespace = "ingress"
		s.ExternalIPs = []netip.Addr{l.root.v4, nodeB.v4, netip.MustParseAddr("203.0.113.12")}
		s.Ports = []policy.ServicePort{{Name: "http", Protocol: policy.ProtocolTCP, Port: 8443}} // the pods serve "http"
	})
	l.upsertWarned(ingress, l.ep("pod-c1"))
	ws := l.resyncWarned()
	if len(ws) != 2 {
		t.Errorf("warnings %v, want one per node address", ws)
	}
	for _, w := range ws {
		t.Logf("warning: %s", w)
	}

	got := dummyAddrs(t)
	if slices.Contains(got, l.root.v4) || slices.Contains(got, nodeB.v4) || !slices.Contains(got, netip.MustParseAddr("203.0.113.12")) {
		t.Errorf("kube-ipvs0 holds %v: want 203.0.113.12 and no node address", got)
	}
	t.Run("the Service answers on the node's address", func(t *testing.T) {
		l.expectOnly(t, l.client, hostPort(l.root.v4, 8443), TCP, 4, "pod-c1")
	})
	t.Run("the node's other ports answer on its address", func(t *testing.T) {
		for _, from := range []*host{l.client, l.pod("pod-a1")} {
			if name, _, err := l.TCP(from, hostPort(l.root.v4, 8181)); err != nil || name != "node-a-host" {
				t.Errorf("from %s to %s:8181: %q, %v; want node-a-host", from, l.root.v4, name, err)
			}
		}
		l.expectOnly(t, l.client, hostPort(l.root.v4, 30091), TCP, 4, "pod-b1")
	})
	t.Run("the node reaches the other node", func(t *testing.T) {
		if name, _, err := l.TCP(l.root, hostPort(nodeB.v4, 8182)); err != nil || name != "node-b-host" {
			t.Errorf("node-a to %s:8182: %q, %v; want node-b-host", nodeB.v4, name, err)
		}
	})
	t.Run("the Service's other external IP is served", func(t *testing.T) {
		l.expectOnly(t, l.pod("pod-a1"), "203.0.113.12:8443", TCP, 4, "pod-c1")
	})
	t.Run("a foreign virtual server on the node address survives a resync", func(t *testing.T) {
		l.resyncWarned()
		if _, err := ipv.GetService(foreign); err != nil {
			t.Errorf("foreign virtual server %s:22 after resync: %v", l.root.v4, err)
		}
	})
}

// TestExternalIPOnANodeAddressLeavesTheNodeAlone: with
// --refuse-node-address-external-ips, a Service whose external IPs name
// this node's address and another node's is not served on them: neither
// is bound on kube-ipvs0, the node's own host port and NodePorts on its
// address keep answering, the node still reaches the other node, and a
// foreign virtual server on the node address survives a resync.
func TestExternalIPOnANodeAddressLeavesTheNodeAlone(t *testing.T) {
	l := newLab(t, func(c *policy.Config) { c.RefuseNodeAddresses = true })
	nodeB := l.node("node-b")
	l.serve(l.root, "node-a-host", 8181, 8181)
	l.serve(nodeB.host, "node-b-host", 8182, 8182)
	ipv, err := ipvs.New("")
	l.must(err)
	defer ipv.Close()
	foreign := &ipvs.Service{Address: net.IP(l.root.v4.AsSlice()), Protocol: unix.IPPROTO_TCP, Port: 22,
		AddressFamily: unix.AF_INET, SchedName: "rr", Netmask: 0xffffffff}
	l.must(ipv.NewService(foreign))
	defer func() { _ = ipv.DelService(foreign) }()

	web := service("web", []string{"10.96.12.1"}, nodePorts(30091, 30061))
	l.setService(web, l.ep("pod-b1"))
	grab := service("grab", []string{"10.96.12.2"}, func(s *policy.Service) {
		s.Key.Namespace = "tenant"
		s.ExternalIPs = []netip.Addr{l.root.v4, nodeB.v4, netip.MustParseAddr("203.0.113.12")}
		// node-a's host port: served here, it would take the host's.
		s.Ports = []policy.ServicePort{{Name: "http", Protocol: policy.ProtocolTCP, Port: 8181}}
	})
	l.upsertWarned(grab, l.ep("pod-c1"))
	ws := l.resyncWarned()
	if len(ws) != 2 {
		t.Errorf("warnings %v, want one per node address", ws)
	}
	for _, w := range ws {
		t.Logf("warning: %s", w)
	}

	if got := dummyAddrs(t); slices.Contains(got, l.root.v4) || slices.Contains(got, nodeB.v4) {
		t.Errorf("kube-ipvs0 holds a node address: %v", got)
	}
	t.Run("the node's host port answers on its address", func(t *testing.T) {
		for _, from := range []*host{l.client, l.pod("pod-a1")} {
			if name, _, err := l.TCP(from, hostPort(l.root.v4, 8181)); err != nil || name != "node-a-host" {
				t.Errorf("from %s to %s:8181: %q, %v; want node-a-host", from, l.root.v4, name, err)
			}
		}
	})
	t.Run("NodePorts on the node address answer", func(t *testing.T) {
		l.expectOnly(t, l.client, hostPort(l.root.v4, 30091), TCP, 4, "pod-b1")
	})
	t.Run("the node reaches the other node", func(t *testing.T) {
		if name, _, err := l.TCP(l.root, hostPort(nodeB.v4, 8182)); err != nil || name != "node-b-host" {
			t.Errorf("node-a to %s:8182: %q, %v; want node-b-host", nodeB.v4, name, err)
		}
	})
	t.Run("the Service's other external IP is served", func(t *testing.T) {
		l.expectOnly(t, l.pod("pod-a1"), "203.0.113.12:8181", TCP, 4, "pod-c1")
	})
	t.Run("a foreign virtual server on the node address survives a resync", func(t *testing.T) {
		l.resyncWarned()
		if _, err := ipv.GetService(foreign); err != nil {
			t.Errorf("foreign virtual server %s:22 after resync: %v", l.root.v4, err)
		}
	})
}

// TestContestedVirtualServerStaysWithTheClusterIP: a tenant's external IP
// naming another Service's ClusterIP takes nothing of it, neither the
// ports that Service uses nor the others, on a full resync and on an
// incremental Apply: the ClusterIP's endpoints answer, its unused port is
// refused (the VIP filter), and no sync fails.
func TestContestedVirtualServerStaysWithTheClusterIP(t *testing.T) {
	l := newLab(t)
	dns := service("dns", []string{"10.96.13.10"})
	l.setService(dns, l.ep("pod-b1"))
	grab := service("grab", []string{"10.96.13.99"}, func(s *policy.Service) {
		s.Key.Namespace = "aaa" // sorts before default
		s.ExternalIPs = []netip.Addr{netip.MustParseAddr("10.96.13.10")}
		s.Ports = []policy.ServicePort{{Name: "http", Protocol: policy.ProtocolTCP, Port: 8080}, portDNS} // 8080: unused by dns
	})
	from := l.pod("pod-a1")

	t.Run("incremental: the claim arrives after the owner", func(t *testing.T) {
		l.resync()
		l.engine.UpsertService(grab) // no endpoints: its own virtual servers reject
		keys := append([]policy.ServiceKey{grab.Key}, l.engine.Reassigned()...)
		var changes []policy.ServicePlan
		for _, k := range keys {
			sp, _ := l.engine.ComputeService(k)
			changes = append(changes, sp)
		}
		if err := l.dp.Apply(changes); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		l.expectOnly(t, from, "10.96.13.10:80", TCP, 6, "pod-b1")
		l.expectOnly(t, from, "10.96.13.10:53", UDP, 6, "pod-b1")
		l.expectFastFailure(t, from, TCP, "10.96.13.99:8080")
	})
	t.Run("full resync", func(t *testing.T) {
		l.setEndpoints(grab.Key, l.ep("pod-c1"))
		ws := l.resyncWarned()
		if len(ws) != 1 || ws[0].Reason != policy.ReasonClusterIPAddress {
			t.Errorf("warnings %v, want one ExternalIPIsClusterIP on aaa/grab", ws)
		}
		l.expectOnly(t, from, "10.96.13.10:80", TCP, 6, "pod-b1")
		l.expectOnly(t, from, "10.96.13.99:8080", TCP, 6, "pod-c1")
		l.expectFastFailure(t, from, TCP, "10.96.13.10:8080") // dns's unused port: not grab's
	})
}

// TestNodePortOnAHostAddressNotInNodeStatus: as kube-proxy's IPVS mode,
// NodePorts are served on every address of the host's interfaces (read
// by package hostaddr over rtnetlink), including one the Node object
// does not list, and a new address is noticed by the subscription.
func TestNodePortOnAHostAddressNotInNodeStatus(t *testing.T) {
	l := newLab(t)
	web := service("web", []string{"10.96.14.1"}, nodePorts(30092, 30062))
	l.setService(web, l.ep("pod-b1"))
	extra := netip.MustParseAddr("192.168.100.201")
	l.must(labnet.AddAddrs(l.rootNL, l.bridge, prefix(extra, 24)))

	src := hostaddr.Netlink{Exclude: "kube-ipvs0"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changed := make(chan struct{}, 16)
	go src.Watch(ctx, func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	addrs, err := src.List()
	l.must(err)
	if !slices.Contains(addrs, extra) || !slices.Contains(addrs, l.root.v4) {
		t.Fatalf("host addresses %v lack %s or %s", addrs, extra, l.root.v4)
	}
	l.engine.SetLocalAddresses(addrs)
	l.resync()
	l.expectOnly(t, l.client, hostPort(extra, 30092), TCP, 4, "pod-b1")
	l.expectOnly(t, l.client, hostPort(l.root.v4, 30092), TCP, 4, "pod-b1")

	t.Run("a new address is noticed and served", func(t *testing.T) {
		drain(changed)
		later := netip.MustParseAddr("192.168.100.202")
		l.must(labnet.AddAddrs(l.rootNL, l.bridge, prefix(later, 24)))
		select {
		case <-changed:
		case <-time.After(5 * time.Second):
			t.Fatal("no change reported within 5 s of adding an address")
		}
		addrs, err := src.List()
		l.must(err)
		if !l.engine.SetLocalAddresses(addrs) {
			t.Fatalf("SetLocalAddresses(%v) reported no change", addrs)
		}
		l.resync()
		l.expectOnly(t, l.client, hostPort(later, 30092), TCP, 4, "pod-b1")
	})
}

func drain(c chan struct{}) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

// TestExternalLocalServesInClusterClientsFromAllEndpoints: an eTP=Local
// NodePort, external IP and load balancer hold external clients to this
// node's endpoints with their address kept, while pods and the node
// itself reach every endpoint through the service's ClusterIP, as in
// kube-proxy's iptables and nftables modes; without a local endpoint,
// external clients are dropped and in-cluster ones still served.
func TestExternalLocalServesInClusterClientsFromAllEndpoints(t *testing.T) {
	l := newLab(t)
	lbIP, extIP := netip.MustParseAddr("198.51.100.31"), netip.MustParseAddr("203.0.113.31")
	withLocal := service("etp-local", []string{"10.96.15.1", "fd00:96::15:1"}, nodePorts(30093, 30063), externalLocal,
		func(s *policy.Service) {
			s.LoadBalancerIPs = []netip.Addr{lbIP}
			s.ExternalIPs = []netip.Addr{extIP}
		})
	l.setService(withLocal, l.ep("pod-a1"), l.ep("pod-b1"), l.ep("pod-c1"), l.ep6("pod-a1"), l.ep6("pod-b1"), l.ep6("pod-c1"))
	remoteOnly := service("etp-local-remote", []string{"10.96.15.2"}, nodePorts(30094, 30064), externalLocal)
	l.setService(remoteOnly, l.ep("pod-b1"), l.ep("pod-c1"))
	l.resync()
	node4, node6, pod := l.root.v4, l.root.v6, l.pod("pod-a2")
	all := []string{"pod-a1", "pod-b1", "pod-c1"}

	t.Run("external clients reach only the local endpoint and keep their address", func(t *testing.T) {
		for _, tc := range []struct {
			proto Proto
			addr  string
		}{
			{TCP, hostPort(node4, 30093)}, {UDP, hostPort(node4, 30063)}, {TCP, hostPort(node6, 30093)},
			{TCP, hostPort(lbIP, 80)}, {UDP, hostPort(lbIP, 53)}, // the client has no route to 203.0.113.0/24
		} {
			l.expectOnly(t, l.client, tc.addr, tc.proto, 12, "pod-a1")
			want := l.client.v4.String()
			if strings.HasPrefix(tc.addr, "[") {
				want = l.client.v6.String()
			}
			checkPeersProto(t, l.harness, l.client, tc.proto, tc.addr, want)
		}
	})
	t.Run("pods reach every endpoint, unmasqueraded", func(t *testing.T) {
		for _, tc := range []struct {
			proto Proto
			addr  string
		}{
			{TCP, hostPort(node4, 30093)}, {UDP, hostPort(node4, 30063)}, {TCP, hostPort(node6, 30093)},
			{TCP, hostPort(lbIP, 80)}, {UDP, hostPort(lbIP, 53)}, {TCP, hostPort(extIP, 80)},
		} {
			l.expectOnly(t, pod, tc.addr, tc.proto, nConns, all...)
			want := pod.v4.String()
			if strings.HasPrefix(tc.addr, "[") {
				want = pod.v6.String()
			}
			checkPeersProto(t, l.harness, pod, tc.proto, tc.addr, want)
		}
	})
	t.Run("the node itself reaches every endpoint", func(t *testing.T) {
		for _, tc := range []struct {
			proto Proto
			addr  string
		}{{TCP, hostPort(node4, 30093)}, {TCP, hostPort(lbIP, 80)}, {UDP, hostPort(lbIP, 53)}, {TCP, hostPort(extIP, 80)}} {
			l.expectOnly(t, l.root, tc.addr, tc.proto, nConns, all...)
		}
	})
	t.Run("without a local endpoint: external clients dropped, in-cluster ones served", func(t *testing.T) {
		l.expectDrop(t, l.client, TCP, hostPort(node4, 30094))
		l.expectOnly(t, pod, hostPort(node4, 30094), TCP, 12, "pod-b1", "pod-c1")
		l.expectOnly(t, pod, hostPort(node4, 30064), UDP, 12, "pod-b1", "pod-c1")
		l.expectOnly(t, l.root, hostPort(node4, 30094), TCP, 12, "pod-b1", "pod-c1")
	})
}
