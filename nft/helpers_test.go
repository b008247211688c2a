package nft

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

var (
	addr   = netip.MustParseAddr
	prefix = netip.MustParsePrefix
)

var testConfig = Config{ClusterCIDRs: []netip.Prefix{prefix("10.244.0.0/16"), prefix("fd00:244::/48")}}

// dest is a destination on this node; remoteDest one on another node.
func dest(a string, port uint16) policy.Destination {
	return policy.Destination{Address: addr(a), Port: port, Weight: 1, Local: true}
}

func remoteDest(a string, port uint16) policy.Destination {
	return policy.Destination{Address: addr(a), Port: port, Weight: 1}
}

func key(name string) policy.ServiceKey {
	ns, n, _ := strings.Cut(name, "/")
	return policy.ServiceKey{Namespace: ns, Name: n}
}

// vs is a TCP ClusterIP virtual server with the given destinations.
func vs(service, address string, port uint16, dests ...policy.Destination) policy.VirtualServer {
	v := policy.VirtualServer{Service: key(service), Kind: policy.KindClusterIP, Address: addr(address), Port: port,
		Protocol: policy.ProtocolTCP, Masquerade: policy.MasqueradeOffCluster, Destinations: dests}
	if len(dests) == 0 {
		v.WhenEmpty = policy.EmptyReject
	}
	return v
}

// fullPlan puts at least one element in every set and map of both
// families: all kinds, protocols, masquerade modes, empty actions,
// NOTRACK, source ranges (overlapping ones merge) and an external IP
// shared by two services.
func fullPlan() policy.Plan {
	web := vs("default/web", "10.96.0.10", 80, dest("10.244.1.5", 8080), dest("10.244.2.7", 8080))
	web6 := vs("default/web", "fd00:96::10", 80, dest("fd00:244:1::5", 8080))
	dns := vs("kube-system/dns", "10.96.0.53", 53, dest("10.244.1.6", 5353))
	dns6 := vs("kube-system/dns", "fd00:96::53", 53, dest("fd00:244:1::6", 5353))
	for _, v := range []*policy.VirtualServer{&dns, &dns6} {
		v.Protocol, v.NoTrack, v.Masquerade = policy.ProtocolUDP, true, policy.MasqueradeNever
	}
	empty, empty6 := vs("default/empty", "10.96.0.50", 80), vs("default/empty", "fd00:96::50", 80)
	local, local6 := vs("default/local", "192.168.1.10", 30080), vs("default/local", "fd00:1::10", 30080)
	for _, v := range []*policy.VirtualServer{&local, &local6} {
		v.Kind, v.Masquerade, v.WhenEmpty = policy.KindNodePort, policy.MasqueradeNever, policy.EmptyDrop
	}
	local.InternalVia = netip.MustParseAddrPort("10.96.0.60:80") // eTP=Local: in-cluster clients via the ClusterIP
	local6.InternalVia = netip.MustParseAddrPort("[fd00:96::60]:80")
	lb := vs("default/lb", "192.0.2.1", 443, dest("10.244.1.5", 8443))
	lb.SourceRanges = []netip.Prefix{prefix("198.51.100.0/24"), prefix("203.0.113.7/32"), prefix("198.51.100.128/25")}
	lb6 := vs("default/lb", "2001:db8::1", 443, dest("fd00:244:1::5", 8443))
	lb6.SourceRanges = []netip.Prefix{prefix("2001:db8:100::/48")}
	for _, v := range []*policy.VirtualServer{&lb, &lb6} {
		v.Kind, v.Masquerade = policy.KindLoadBalancer, policy.MasqueradeAlways
	}
	extA := vs("shop/a", "192.0.2.2", 80, dest("10.244.3.1", 80))
	extB := vs("shop/b", "192.0.2.2", 81, dest("10.244.3.2", 81))
	extB.Protocol = policy.ProtocolSCTP
	for _, v := range []*policy.VirtualServer{&extA, &extB} {
		v.Kind, v.Masquerade = policy.KindExternalIP, policy.MasqueradeAlways
	}
	vss := []policy.VirtualServer{web, web6, dns, dns6, empty, empty6, local, local6, lb, lb6, extA, extB}
	policy.SortVirtualServers(vss)
	return policy.Plan{Node: "node-a", VirtualServers: vss}
}

// servicePlan returns one service's virtual servers of plan.
func servicePlan(plan policy.Plan, name string) policy.ServicePlan {
	sp := policy.ServicePlan{Service: key(name)}
	for _, v := range plan.VirtualServers {
		if v.Service == sp.Service {
			sp.VirtualServers = append(sp.VirtualServers, v)
		}
	}
	return sp
}

// manyServices returns a plan of n ClusterIP services with two
// destinations each.
func manyServices(n int) policy.Plan {
	var vss []policy.VirtualServer
	for i := range n {
		ip := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})
		pod := func(j int) policy.Destination {
			return dest(netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)}).String(), uint16(8000+j))
		}
		vss = append(vss, vs(fmt.Sprintf("ns/svc-%d", i), ip.String(), 80, pod(0), pod(1)))
	}
	policy.SortVirtualServers(vss)
	return policy.Plan{Node: "node-a", VirtualServers: vss}
}

// countPrefix counts the lines starting with prefix.
func countPrefix(lines []string, prefix string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}
