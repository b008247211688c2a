//go:build integration

package nftwriter

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

var (
	a = netip.MustParseAddr
	p = netip.MustParsePrefix
)

var testConfig = nft.Config{ClusterCIDRs: []netip.Prefix{p("10.244.0.0/16"), p("fd00:244::/48")}}

// nodeAPods are this node's (node-a's) pod networks: destinations there
// are local, and only local destinations have hairpin elements.
var nodeAPods = []netip.Prefix{p("10.244.1.0/24"), p("fd00:244:1::/64")}

func dest(addr string, port uint16) policy.Destination {
	d := policy.Destination{Address: a(addr), Port: port, Weight: 1}
	d.Local = slices.ContainsFunc(nodeAPods, func(pp netip.Prefix) bool { return pp.Contains(d.Address) })
	return d
}

func localDest(addr string, port uint16) policy.Destination {
	d := dest(addr, port)
	d.Local = true
	return d
}

// fullPlan has at least one element in every set and map of both families.
func fullPlan() policy.Plan {
	vss := []policy.VirtualServer{
		{Service: policy.ServiceKey{Namespace: "default", Name: "web"}, Kind: policy.KindClusterIP, Address: a("10.96.0.10"), Port: 80, Protocol: policy.ProtocolTCP,
			Masquerade: policy.MasqueradeOffCluster, Destinations: []policy.Destination{dest("10.244.1.5", 8080), dest("10.244.2.7", 8080)}},
		{Service: policy.ServiceKey{Namespace: "default", Name: "web"}, Kind: policy.KindClusterIP, Address: a("fd00:96::10"), Port: 80, Protocol: policy.ProtocolTCP,
			Masquerade: policy.MasqueradeOffCluster, Destinations: []policy.Destination{dest("fd00:244:1::5", 8080)}},
		{Service: policy.ServiceKey{Namespace: "kube-system", Name: "dns"}, Kind: policy.KindClusterIP, Address: a("10.96.0.53"), Port: 53, Protocol: policy.ProtocolUDP,
			NoTrack: true, Masquerade: policy.MasqueradeNever, Destinations: []policy.Destination{dest("10.244.1.6", 5353)}},
		{Service: policy.ServiceKey{Namespace: "kube-system", Name: "dns"}, Kind: policy.KindClusterIP, Address: a("fd00:96::53"), Port: 53, Protocol: policy.ProtocolUDP,
			NoTrack: true, Masquerade: policy.MasqueradeNever, Destinations: []policy.Destination{dest("fd00:244:1::6", 5353)}},
		{Service: policy.ServiceKey{Namespace: "default", Name: "empty"}, Kind: policy.KindClusterIP, Address: a("10.96.0.50"), Port: 80, Protocol: policy.ProtocolTCP,
			Masquerade: policy.MasqueradeOffCluster, WhenEmpty: policy.EmptyReject},
		{Service: policy.ServiceKey{Namespace: "default", Name: "empty"}, Kind: policy.KindClusterIP, Address: a("fd00:96::50"), Port: 80, Protocol: policy.ProtocolTCP,
			Masquerade: policy.MasqueradeOffCluster, WhenEmpty: policy.EmptyReject},
		{Service: policy.ServiceKey{Namespace: "default", Name: "local"}, Kind: policy.KindNodePort, Address: a("192.168.1.10"), Port: 30080, Protocol: policy.ProtocolTCP,
			Masquerade: policy.MasqueradeNever, WhenEmpty: policy.EmptyDrop, InternalVia: netip.MustParseAddrPort("10.96.0.60:80")},
		{Service: policy.ServiceKey{Namespace: "default", Name: "local"}, Kind: policy.KindNodePort, Address: a("fd00:1::10"), Port: 30080, Protocol: policy.ProtocolTCP,
			Masquerade: policy.MasqueradeNever, WhenEmpty: policy.EmptyDrop, InternalVia: netip.MustParseAddrPort("[fd00:96::60]:80")},
		{Service: policy.ServiceKey{Namespace: "default", Name: "lb"}, Kind: policy.KindLoadBalancer, Address: a("192.0.2.1"), Port: 443, Protocol: policy.ProtocolTCP,
			Masquerade:   policy.MasqueradeAlways,
			SourceRanges: []netip.Prefix{p("198.51.100.0/24"), p("203.0.113.7/32"), p("198.51.100.128/25")},
			Destinations: []policy.Destination{dest("10.244.1.5", 8443)}},
		{Service: policy.ServiceKey{Namespace: "default", Name: "lb"}, Kind: policy.KindLoadBalancer, Address: a("2001:db8::1"), Port: 443, Protocol: policy.ProtocolTCP,
			Masquerade: policy.MasqueradeAlways, SourceRanges: []netip.Prefix{p("2001:db8:100::/48")},
			Destinations: []policy.Destination{dest("fd00:244:1::5", 8443)}},
		// Two services share external IP 192.0.2.2.
		{Service: policy.ServiceKey{Namespace: "shop", Name: "a"}, Kind: policy.KindExternalIP, Address: a("192.0.2.2"), Port: 80, Protocol: policy.ProtocolTCP,
			Masquerade: policy.MasqueradeAlways, Destinations: []policy.Destination{dest("10.244.3.1", 80)}},
		{Service: policy.ServiceKey{Namespace: "shop", Name: "b"}, Kind: policy.KindExternalIP, Address: a("192.0.2.2"), Port: 81, Protocol: policy.ProtocolSCTP,
			Masquerade: policy.MasqueradeAlways, Destinations: []policy.Destination{dest("10.244.3.2", 81)}},
	}
	policy.SortVirtualServers(vss)
	return policy.Plan{Node: "node-a", VirtualServers: vss}
}

// servicePlan returns one service's virtual servers of plan.
func servicePlan(plan policy.Plan, name string) policy.ServicePlan {
	ns, n, _ := strings.Cut(name, "/")
	sp := policy.ServicePlan{Service: policy.ServiceKey{Namespace: ns, Name: n}}
	for _, vs := range plan.VirtualServers {
		if vs.Service == sp.Service {
			sp.VirtualServers = append(sp.VirtualServers, vs)
		}
	}
	return sp
}

// wantElements is fullPlan's table, written out by hand: set name to
// elements as DumpTable prints them (sorted).
var wantElements = map[string][]string{
	"cluster-cidrs-v4":  {"10.244.0.0", "10.245.0.0 (interval end)"},
	"cluster-cidrs-v6":  {"fd00:244:1:: (interval end)", "fd00:244::"},
	"empty-services-v4": {"10.96.0.50 . tcp . 80 : goto reject-packet", "192.168.1.10 . tcp . 30080 : drop"},
	"empty-services-v6": {"fd00:1::10 . tcp . 30080 : drop", "fd00:96::50 . tcp . 80 : goto reject-packet"},
	// Local destinations only: 10.244.2.7 and 10.244.3.x run on other nodes.
	"hairpin-v4":           {"10.244.1.5 . tcp . 8080 . 10.244.1.5", "10.244.1.5 . tcp . 8443 . 10.244.1.5", "10.244.1.6 . udp . 5353 . 10.244.1.6"},
	"hairpin-v6":           {"fd00:244:1::5 . tcp . 8080 . fd00:244:1::5", "fd00:244:1::5 . tcp . 8443 . fd00:244:1::5", "fd00:244:1::6 . udp . 5353 . fd00:244:1::6"},
	"internal-via-v4":      {"192.168.1.10 . tcp . 30080 : 10.96.0.60 . 80"},
	"internal-via-v6":      {"fd00:1::10 . tcp . 30080 : fd00:96::60 . 80"},
	"internal-via-keys-v4": {"192.168.1.10 . tcp . 30080"},
	"internal-via-keys-v6": {"fd00:1::10 . tcp . 30080"},
	"lb-source-allowed-v4": {"192.0.2.1 . tcp . 443 . 198.51.100.0 - 192.0.2.1 . tcp . 443 . 198.51.100.255",
		"192.0.2.1 . tcp . 443 . 203.0.113.7 - 192.0.2.1 . tcp . 443 . 203.0.113.7"},
	"lb-source-allowed-v6":      {"2001:db8::1 . tcp . 443 . 2001:db8:100:: - 2001:db8::1 . tcp . 443 . 2001:db8:100:ffff:ffff:ffff:ffff:ffff"},
	"lb-source-ranged-v4":       {"192.0.2.1 . tcp . 443"},
	"lb-source-ranged-v6":       {"2001:db8::1 . tcp . 443"},
	"masquerade-always-v4":      {"192.0.2.1 . tcp . 443", "192.0.2.2 . sctp . 81", "192.0.2.2 . tcp . 80"},
	"masquerade-always-v6":      {"2001:db8::1 . tcp . 443"},
	"masquerade-off-cluster-v4": {"10.96.0.10 . tcp . 80", "10.96.0.50 . tcp . 80"},
	"masquerade-off-cluster-v6": {"fd00:96::10 . tcp . 80", "fd00:96::50 . tcp . 80"},
	"nodeport-services-v4":      {"192.168.1.10 . tcp . 30080"},
	"nodeport-services-v6":      {"fd00:1::10 . tcp . 30080"},
	"notrack-endpoint-addrs-v4": {"10.244.1.6"},
	"notrack-endpoint-addrs-v6": {"fd00:244:1::6"},
	"notrack-endpoints-v4":      {"10.244.1.6 . udp . 5353"},
	"notrack-endpoints-v6":      {"fd00:244:1::6 . udp . 5353"},
	"notrack-services-v4":       {"10.96.0.53 . udp . 53"},
	"notrack-services-v6":       {"fd00:96::53 . udp . 53"},
	"service-ips-v4":            {"10.96.0.10", "10.96.0.50", "10.96.0.53", "192.0.2.1", "192.0.2.2"},
	"service-ips-v6":            {"2001:db8::1", "fd00:96::10", "fd00:96::50", "fd00:96::53"},
	"service-ports-v4": {"10.96.0.10 . tcp . 80", "10.96.0.50 . tcp . 80", "10.96.0.53 . udp . 53", "192.0.2.1 . tcp . 443",
		"192.0.2.2 . sctp . 81", "192.0.2.2 . tcp . 80"},
	"service-ports-v6": {"2001:db8::1 . tcp . 443", "fd00:96::10 . tcp . 80", "fd00:96::50 . tcp . 80", "fd00:96::53 . udp . 53"},
}

// wantRules is the rule count of every chain, for any plan.
var wantRules = map[string]int{
	"raw-prerouting": 6, "raw-output": 2, "nat-prerouting": 6, "nat-output": 8, "filter-forward": 1,
	"nat-postrouting": 5, "filter-input": 10, "filter-output": 4, "reject-packet": 2,
}

// parseDump splits a DumpTable text into set name → elements; anonymous
// sets are not listed there.
func parseDump(dump string) map[string][]string {
	out := map[string][]string{}
	var cur string
	for _, line := range strings.Split(dump, "\n") {
		switch {
		case strings.HasPrefix(line, "\tset "), strings.HasPrefix(line, "\tmap "):
			cur = strings.Fields(line)[1]
			out[cur] = nil
		case strings.HasPrefix(line, "\tchain "):
			cur = ""
		case strings.HasPrefix(line, "\t\t") && cur != "":
			out[cur] = append(out[cur], strings.TrimPrefix(line, "\t\t"))
		}
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out
}
