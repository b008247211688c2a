//go:build integration

package traffic

import (
	"net/netip"
	"testing"
)

// TestDualStackClusterIP: a service with an IPv4 and an IPv6 cluster IP
// is served in both families, each by its family's endpoints, and the
// backends see the client pod's own address.
func TestDualStackClusterIP(t *testing.T) {
	l := newLab(t)
	vip4, vip6 := netip.MustParseAddr("10.96.13.1"), netip.MustParseAddr("fd00:96::13:1")
	l.setService(service("dual", []string{vip4.String(), vip6.String()}),
		l.ep("pod-a1"), l.ep("pod-b1"), l.ep6("pod-a1"), l.ep6("pod-b1"), l.ep6("pod-c1"))
	l.resync()
	client := l.pod("pod-a3")
	for _, tc := range []struct {
		name    string
		vip     netip.Addr
		peer    netip.Addr
		allowed []string
	}{
		{"IPv6", vip6, client.v6, []string{"pod-a1", "pod-b1", "pod-c1"}},
		{"IPv4", vip4, client.v4, []string{"pod-a1", "pod-b1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l.expectOnly(t, client, hostPort(tc.vip, 80), TCP, nConns, tc.allowed...)
			l.expectOnly(t, client, hostPort(tc.vip, 53), UDP, nConns, tc.allowed...)
			checkPeersProto(t, l.harness, client, TCP, hostPort(tc.vip, 80), tc.peer.String())
		})
	}
}
