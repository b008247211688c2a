package app

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// TestHealthCheckNodePortsListenOnNodePortAddresses: kube-proxy's health
// check servers listen, per family, on the host's addresses in
// nodePortAddresses, on the family's unspecified address when none of
// its CIDRs is given, and on every address without nodePortAddresses.
func TestHealthCheckNodePortsListenOnNodePortAddresses(t *testing.T) {
	v4 := []corev1.IPFamily{corev1.IPv4Protocol}
	dual := []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	host := addrs("127.0.0.1", "::1", "192.0.2.2", "198.51.100.7", "fd00::2", "fe80::1")
	for _, tc := range []struct {
		name     string
		npa      []string
		families []corev1.IPFamily
		primary  []netip.Addr
		want     []netip.Addr
	}{
		{name: "no nodePortAddresses listens on every address", families: v4},
		{name: "a CIDR keeps the host's addresses in it", npa: []string{"192.0.2.0/24"}, families: v4,
			want: addrs("192.0.2.2")},
		{name: "loopback is a host address like any other", npa: []string{"127.0.0.0/8", "198.51.100.0/24"}, families: v4,
			want: addrs("127.0.0.1", "198.51.100.7")},
		{name: "a family without a CIDR listens on its unspecified address", npa: []string{"192.0.2.0/24"}, families: dual,
			want: addrs("192.0.2.2", "::")},
		{name: "an IPv6 CIDR brings its family in", npa: []string{"192.0.2.0/24", "fd00::/64"}, families: v4,
			want: addrs("192.0.2.2", "fd00::2")},
		{name: "a zero CIDR matches every address of its family", npa: []string{"0.0.0.0/0"}, families: v4,
			want: addrs("0.0.0.0")},
		{name: "a CIDR that matches nothing listens nowhere", npa: []string{"203.0.113.0/24"}, families: v4},
		{name: "primary is the node's primary IPs", npa: []string{"primary"}, families: dual,
			primary: addrs("192.0.2.2", "fd00::2"), want: addrs("192.0.2.2", "fd00::2")},
		{name: "primary with only an IPv4 primary IP listens on every IPv6 address", npa: []string{"primary"}, families: dual,
			primary: addrs("192.0.2.2"), want: addrs("192.0.2.2", "::")},
		{name: "primary without a primary IP listens on every address", npa: []string{"primary"}, families: v4},
		{name: "a loopback primary IP is no primary IP", npa: []string{"primary"}, families: v4, primary: addrs("127.0.0.1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := serviceHealthAddrs(tc.npa, tc.families, tc.primary, host)
			if !slices.Equal(got, tc.want) {
				t.Errorf("serviceHealthAddrs(%v, %v) = %v, want %v", tc.npa, tc.families, got, tc.want)
			}
		})
	}
}

// TestBindAddressOverridesThePrimaryIP: the node's primary IP of a family
// is its first InternalIP, else its first ExternalIP, unless a specified
// bindAddress of that family replaces it, as kube-proxy's detectNodeIPs.
func TestBindAddressOverridesThePrimaryIP(t *testing.T) {
	node := &corev1.Node{Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeExternalIP, Address: "203.0.113.9"},
		{Type: corev1.NodeInternalIP, Address: "192.0.2.2"},
		{Type: corev1.NodeInternalIP, Address: "192.0.2.3"},
		{Type: corev1.NodeExternalIP, Address: "2001:db8::9"},
	}}}
	for _, tc := range []struct {
		name string
		node *corev1.Node
		bind string
		want []netip.Addr
	}{
		{name: "the first InternalIP, else the first ExternalIP", node: node, want: addrs("192.0.2.2", "2001:db8::9")},
		{name: "an unspecified bindAddress changes nothing", node: node, bind: "0.0.0.0", want: addrs("192.0.2.2", "2001:db8::9")},
		{name: "an IPv4 bindAddress replaces the IPv4 primary IP", node: node, bind: "198.51.100.7", want: addrs("198.51.100.7", "2001:db8::9")},
		{name: "an IPv6 bindAddress replaces the IPv6 primary IP", node: node, bind: "fd00::7", want: addrs("192.0.2.2", "fd00::7")},
		{name: "a bindAddress without a Node is the primary IP", bind: "198.51.100.7", want: addrs("198.51.100.7")},
		{name: "no Node, no bindAddress, no primary IP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var bind netip.Addr
			if tc.bind != "" {
				bind = netip.MustParseAddr(tc.bind)
			}
			if got := primaryIPs(tc.node, bind); !slices.Equal(got, tc.want) {
				t.Errorf("primaryIPs = %v, want %v", got, tc.want)
			}
		})
	}
}
