package nft

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/nftables/expr"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"golang.org/x/sys/unix"
)

// elementTexts renders a service's contributions as "set: element".
func elementTexts(vss ...policy.VirtualServer) []string {
	var out []string
	for _, c := range contributions(vss) {
		out = append(out, c.id.set.name()+": "+formatElement(c.id, c.v))
	}
	slices.Sort(out)
	return out
}

func TestVirtualServerElements(t *testing.T) {
	with := func(v policy.VirtualServer, edit func(*policy.VirtualServer)) policy.VirtualServer {
		edit(&v)
		return v
	}
	web := vs("default/web", "10.96.0.10", 80, dest("10.244.1.5", 8080))
	for _, tc := range []struct {
		name string
		vss  []policy.VirtualServer
		want []string
	}{
		{name: "ClusterIP: address, port, masquerade mode, hairpin", vss: []policy.VirtualServer{web}, want: []string{
			"hairpin-v4: 10.244.1.5 . tcp . 8080 . 10.244.1.5",
			"masquerade-off-cluster-v4: 10.96.0.10 . tcp . 80",
			"service-ips-v4: 10.96.0.10",
			"service-ports-v4: 10.96.0.10 . tcp . 80",
		}},
		{name: "only local destinations get hairpin elements", vss: []policy.VirtualServer{vs("default/web", "10.96.0.10", 80, dest("10.244.1.5", 8080), remoteDest("10.244.2.5", 8080))}, want: []string{
			"hairpin-v4: 10.244.1.5 . tcp . 8080 . 10.244.1.5",
			"masquerade-off-cluster-v4: 10.96.0.10 . tcp . 80",
			"service-ips-v4: 10.96.0.10",
			"service-ports-v4: 10.96.0.10 . tcp . 80",
		}},
		{name: "NodePort addresses are node addresses, not service IPs; the NodePort is recorded", vss: []policy.VirtualServer{with(web, func(v *policy.VirtualServer) {
			v.Kind, v.Masquerade, v.Destinations = policy.KindNodePort, policy.MasqueradeAlways, nil
		})}, want: []string{
			"masquerade-always-v4: 10.96.0.10 . tcp . 80",
			"nodeport-services-v4: 10.96.0.10 . tcp . 80",
		}},
		{name: "an external IP on a node address is served as a NodePort: not a service IP, recorded", vss: []policy.VirtualServer{with(web, func(v *policy.VirtualServer) {
			v.Kind, v.OnNodeAddress, v.Masquerade, v.Destinations = policy.KindExternalIP, true, policy.MasqueradeAlways, nil
		})}, want: []string{
			"masquerade-always-v4: 10.96.0.10 . tcp . 80",
			"nodeport-services-v4: 10.96.0.10 . tcp . 80",
		}},
		{name: "NodePort of IPv6, UDP, with destinations: recorded in the v6 set", vss: []policy.VirtualServer{with(vs("a/b", "fd00:1::10", 30053, dest("fd00:244::5", 53)), func(v *policy.VirtualServer) {
			v.Kind, v.Masquerade, v.Protocol = policy.KindNodePort, policy.MasqueradeNever, policy.ProtocolUDP
		})}, want: []string{
			"hairpin-v6: fd00:244::5 . udp . 53 . fd00:244::5",
			"nodeport-services-v6: fd00:1::10 . udp . 30053",
		}},
		{name: "WhenEmpty Reject goes to reject-packet", vss: []policy.VirtualServer{vs("a/b", "10.96.0.1", 53)}, want: []string{
			"empty-services-v4: 10.96.0.1 . tcp . 53 : goto reject-packet",
			"masquerade-off-cluster-v4: 10.96.0.1 . tcp . 53",
			"service-ips-v4: 10.96.0.1",
			"service-ports-v4: 10.96.0.1 . tcp . 53",
		}},
		{name: "WhenEmpty Drop drops; Never masquerades nothing", vss: []policy.VirtualServer{with(vs("a/b", "fd00::1", 53), func(v *policy.VirtualServer) {
			v.WhenEmpty, v.Masquerade, v.Protocol = policy.EmptyDrop, policy.MasqueradeNever, policy.ProtocolUDP
		})}, want: []string{
			"empty-services-v6: fd00::1 . udp . 53 : drop",
			"service-ips-v6: fd00::1",
			"service-ports-v6: fd00::1 . udp . 53",
		}},
		{name: "WhenEmpty is ignored with destinations", vss: []policy.VirtualServer{with(web, func(v *policy.VirtualServer) {
			v.WhenEmpty, v.Masquerade = policy.EmptyReject, policy.MasqueradeNever
		})}, want: []string{
			"hairpin-v4: 10.244.1.5 . tcp . 8080 . 10.244.1.5",
			"service-ips-v4: 10.96.0.10",
			"service-ports-v4: 10.96.0.10 . tcp . 80",
		}},
		{name: "NoTrack: the service and every destination", vss: []policy.VirtualServer{with(web, func(v *policy.VirtualServer) {
			v.NoTrack, v.Masquerade, v.Protocol = true, policy.MasqueradeNever, policy.ProtocolSCTP
		})}, want: []string{
			"hairpin-v4: 10.244.1.5 . sctp . 8080 . 10.244.1.5",
			"notrack-endpoint-addrs-v4: 10.244.1.5",
			"notrack-endpoints-v4: 10.244.1.5 . sctp . 8080",
			"notrack-services-v4: 10.96.0.10 . sctp . 80",
			"service-ips-v4: 10.96.0.10",
			"service-ports-v4: 10.96.0.10 . sctp . 80",
		}},
		{name: "LoadBalancer source ranges merge; other families are ignored", vss: []policy.VirtualServer{with(web, func(v *policy.VirtualServer) {
			v.Kind, v.Masquerade, v.Destinations = policy.KindLoadBalancer, policy.MasqueradeNever, nil
			v.SourceRanges = []netip.Prefix{prefix("10.1.0.0/16"), prefix("10.0.0.0/8"), prefix("11.0.0.0/8"), prefix("12.0.0.0/8"), prefix("13.0.0.1/32"), prefix("fd00::/8")}
		})}, want: []string{
			"lb-source-allowed-v4: 10.96.0.10 . tcp . 80 . 10.0.0.0-12.255.255.255",
			"lb-source-allowed-v4: 10.96.0.10 . tcp . 80 . 13.0.0.1",
			"lb-source-ranged-v4: 10.96.0.10 . tcp . 80",
			"service-ips-v4: 10.96.0.10",
			"service-ports-v4: 10.96.0.10 . tcp . 80",
		}},
		{name: "NodeInSourceRanges: the load balancer's address inside a range merges into it", vss: []policy.VirtualServer{with(web, func(v *policy.VirtualServer) {
			v.Kind, v.Masquerade, v.Destinations = policy.KindLoadBalancer, policy.MasqueradeNever, nil
			v.SourceRanges, v.NodeInSourceRanges = []netip.Prefix{prefix("10.0.0.0/8"), prefix("192.168.0.0/24")}, true
		})}, want: []string{
			"lb-source-allowed-v4: 10.96.0.10 . tcp . 80 . 10.0.0.0/8",
			"lb-source-allowed-v4: 10.96.0.10 . tcp . 80 . 192.168.0.0/24",
			"lb-source-ranged-v4: 10.96.0.10 . tcp . 80",
			"service-ips-v4: 10.96.0.10",
			"service-ports-v4: 10.96.0.10 . tcp . 80",
		}},
		{name: "NodeInSourceRanges adds the load balancer's address as its own range when no range holds it", vss: []policy.VirtualServer{with(web, func(v *policy.VirtualServer) {
			v.Kind, v.Masquerade, v.Destinations, v.Address = policy.KindLoadBalancer, policy.MasqueradeNever, nil, addr("198.51.100.9")
			v.SourceRanges, v.NodeInSourceRanges = []netip.Prefix{prefix("192.168.0.0/24")}, true
		})}, want: []string{
			"lb-source-allowed-v4: 198.51.100.9 . tcp . 80 . 192.168.0.0/24",
			"lb-source-allowed-v4: 198.51.100.9 . tcp . 80 . 198.51.100.9",
			"lb-source-ranged-v4: 198.51.100.9 . tcp . 80",
			"service-ips-v4: 198.51.100.9",
			"service-ports-v4: 198.51.100.9 . tcp . 80",
		}},
		{name: "LoadBalancer with ranges of the other family only is open", vss: []policy.VirtualServer{with(web, func(v *policy.VirtualServer) {
			v.Kind, v.Masquerade, v.Destinations = policy.KindLoadBalancer, policy.MasqueradeNever, nil
			v.SourceRanges = []netip.Prefix{prefix("fd00::/8")}
		})}, want: []string{
			"service-ips-v4: 10.96.0.10",
			"service-ports-v4: 10.96.0.10 . tcp . 80",
		}},
		{name: "source ranges apply to LoadBalancers only", vss: []policy.VirtualServer{with(web, func(v *policy.VirtualServer) {
			v.Kind, v.Masquerade, v.Destinations = policy.KindExternalIP, policy.MasqueradeNever, nil
			v.SourceRanges = []netip.Prefix{prefix("10.0.0.0/8")}
		})}, want: []string{
			"service-ips-v4: 10.96.0.10",
			"service-ports-v4: 10.96.0.10 . tcp . 80",
		}},
		{name: "shared address and endpoint counted once per service", vss: []policy.VirtualServer{
			vs("a/b", "10.96.0.1", 80, dest("10.244.1.1", 80)), with(vs("a/b", "10.96.0.1", 81, dest("10.244.1.1", 80)), func(v *policy.VirtualServer) {
				v.Masquerade = policy.MasqueradeNever
			})}, want: []string{
			"hairpin-v4: 10.244.1.1 . tcp . 80 . 10.244.1.1",
			"masquerade-off-cluster-v4: 10.96.0.1 . tcp . 80",
			"service-ips-v4: 10.96.0.1",
			"service-ports-v4: 10.96.0.1 . tcp . 80",
			"service-ports-v4: 10.96.0.1 . tcp . 81",
		}},
		{name: "unknown protocol or invalid address: nothing", vss: []policy.VirtualServer{
			with(web, func(v *policy.VirtualServer) { v.Protocol = "ICMP" }),
			with(web, func(v *policy.VirtualServer) { v.Address = netip.Addr{} }),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, elementTexts(tc.vss...)); diff != "" {
				t.Errorf("elements (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMergeRanges(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		fam  *family
		want []string
	}{
		{name: "disjoint stay apart", in: []string{"10.0.2.0/24", "10.0.0.0/24"}, fam: familyV4, want: []string{"10.0.0.0/24", "10.0.2.0/24"}},
		{name: "contained merges", in: []string{"10.0.0.0/8", "10.1.0.0/16"}, fam: familyV4, want: []string{"10.0.0.0/8"}},
		{name: "adjacent merges", in: []string{"10.0.0.0/24", "10.0.1.0/24"}, fam: familyV4, want: []string{"10.0.0.0/23"}},
		{name: "unmasked prefixes are masked", in: []string{"10.0.0.7/24"}, fam: familyV4, want: []string{"10.0.0.0/24"}},
		{name: "everything", in: []string{"0.0.0.0/0", "10.0.0.0/8"}, fam: familyV4, want: []string{"0.0.0.0/0"}},
		{name: "top of the space", in: []string{"255.255.255.255/32", "255.255.255.0/24"}, fam: familyV4, want: []string{"255.255.255.0/24"}},
		{name: "other family dropped", in: []string{"10.0.0.0/8", "fd00::/8"}, fam: familyV6, want: []string{"fd00::/8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in []netip.Prefix
			for _, s := range tc.in {
				in = append(in, prefix(s))
			}
			var got []string
			for _, r := range mergeRanges(in, tc.fam) {
				got = append(got, formatRange(r.first, r.last))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("mergeRanges(%v) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

// Every set and map is looked up by at least one rule, in the rule's text
// and its expressions alike (nodeport-services, the record --cleanup
// reads, by filter-forward too); and every chain has rules.
func TestEverySetIsUsed(t *testing.T) {
	inText, inExprs := map[string]bool{}, map[string]bool{}
	chains := map[string]int{}
	for _, r := range ruleSpecs(testConfig.withDefaults()) {
		chains[r.chain]++
		for _, e := range r.exprs {
			if l, ok := e.(*expr.Lookup); ok {
				inExprs[l.SetName] = true
			}
		}
		for _, w := range strings.Fields(r.text) {
			if name, ok := strings.CutPrefix(w, "@"); ok {
				inText[name] = true
			}
		}
	}
	for id := setID(0); int(id) < numSets(); id++ {
		if !inText[id.name()] || !inExprs[id.name()] {
			t.Errorf("set %s: used in rule text %t, in expressions %t; want both", id.name(), inText[id.name()], inExprs[id.name()])
		}
	}
	for _, c := range chainDefs {
		if chains[c.name] == 0 {
			t.Errorf("chain %s has no rules", c.name)
		}
	}
}

// TestProtocolNumbersMatchTheKernel: policy's protocol numbers, which both
// writers program, are the kernel's IPPROTO_* and print as nft names.
func TestProtocolNumbersMatchTheKernel(t *testing.T) {
	tests := []struct {
		proto  policy.Protocol
		kernel byte
		name   string
	}{
		{policy.ProtocolTCP, unix.IPPROTO_TCP, "tcp"},
		{policy.ProtocolUDP, unix.IPPROTO_UDP, "udp"},
		{policy.ProtocolSCTP, unix.IPPROTO_SCTP, "sctp"},
	}
	for _, tc := range tests {
		t.Run(string(tc.proto), func(t *testing.T) {
			if n, ok := tc.proto.Number(); !ok || n != tc.kernel {
				t.Errorf("%s.Number() = %d, %v; want IPPROTO %d", tc.proto, n, ok, tc.kernel)
			}
			if got := protoName(tc.kernel); got != tc.name {
				t.Errorf("protoName(%d) = %q, want %q", tc.kernel, got, tc.name)
			}
		})
	}
	if got := protoName(1); got != "1" {
		t.Errorf("protoName(1) = %q, want the number", got)
	}
}
