//go:build integration

package traffic

import (
	"net/netip"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// TestNoEndpointsRejectsFast: a service without endpoints is rejected, so
// clients fail at once (refused or ICMP unreachable) instead of waiting
// for a timeout: from a pod, from node-a itself and from off-cluster.
func TestNoEndpointsRejectsFast(t *testing.T) {
	l := newLab(t)
	vip := netip.MustParseAddr("10.96.9.1")
	s := service("empty", []string{vip.String()})
	l.setService(s)
	l.resync()
	if vs := l.virtualServer(s.Key, policy.KindClusterIP, policy.ProtocolTCP, true); vs.WhenEmpty != policy.EmptyReject {
		t.Fatalf("plan: whenEmpty %q, want Reject", vs.WhenEmpty)
	}
	for _, from := range []*host{l.pod("pod-a3"), l.root, l.client} {
		t.Run("from "+from.Name, func(t *testing.T) {
			l.expectFastFailure(t, from, TCP, hostPort(vip, 80))
			l.expectFastFailure(t, from, UDP, hostPort(vip, 53))
		})
	}
}

// TestVIPRejectsNonServicePorts: a service address answers only on its
// service ports. node-a runs a host service on port 8181 on every
// address (it answers on the node address); through the VIP, port 8181
// must be refused, not served by the host.
func TestVIPRejectsNonServicePorts(t *testing.T) {
	l := newLab(t)
	vip := netip.MustParseAddr("10.96.10.1")
	l.setService(service("web", []string{vip.String()}), l.ep("pod-a1"))
	l.resync()
	l.serve(l.root, "node-a-host", 8181, 8181)
	from := l.pod("pod-a3")
	if name, _, err := l.TCP(from, hostPort(l.root.v4, 8181)); err != nil || name != "node-a-host" {
		t.Fatalf("control: the host service on %s:8181: %q, %v", l.root.v4, name, err)
	}
	l.expectOnly(t, from, hostPort(vip, 80), TCP, 4, "pod-a1")
	for _, src := range []*host{from, l.client} {
		t.Run("from "+src.Name, func(t *testing.T) {
			l.expectFastFailure(t, src, TCP, hostPort(vip, 8181))
			l.expectFastFailure(t, src, UDP, hostPort(vip, 8181))
		})
	}
}

// TestLoadBalancerSourceRanges: a client outside loadBalancerSourceRanges
// is dropped, one inside is served.
func TestLoadBalancerSourceRanges(t *testing.T) {
	l := newLab(t)
	lbIP := netip.MustParseAddr("198.51.100.11")
	s := service("lb", []string{"10.96.11.1"}, func(s *policy.Service) {
		s.LoadBalancerIPs = []netip.Addr{lbIP}
		s.LoadBalancerSourceRanges = []netip.Prefix{prefix(l.client.v4, 32)}
	})
	l.setService(s, l.ep("pod-a1"), l.ep("pod-b1"))
	outside := l.addClient("client-2", 11)
	l.resync()
	t.Run("inside the ranges is served", func(t *testing.T) {
		l.expectOnly(t, l.client, hostPort(lbIP, 80), TCP, nConns, "pod-a1", "pod-b1")
		l.expectOnly(t, l.client, hostPort(lbIP, 53), UDP, nConns, "pod-a1", "pod-b1")
	})
	t.Run("outside the ranges is dropped", func(t *testing.T) {
		l.expectDrop(t, outside, TCP, hostPort(lbIP, 80))
		l.expectDrop(t, outside, UDP, hostPort(lbIP, 53))
	})
}
