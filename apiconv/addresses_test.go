package apiconv

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

func TestParseIPSloppy(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // "" for an error
	}{
		{name: "IPv4 parses", in: "192.0.2.1", want: "192.0.2.1"},
		{name: "IPv4 leading zeros are decimal, as kube-proxy", in: "010.001.002.003", want: "10.1.2.3"},
		{name: "IPv4-mapped IPv6 is its IPv4 address", in: "::ffff:192.0.2.1", want: "192.0.2.1"},
		{name: "IPv4-mapped IPv6 in hex is its IPv4 address", in: "::ffff:c000:201", want: "192.0.2.1"},
		{name: "IPv6 written long is canonical", in: "2001:DB8:0:0:0:0:0:1", want: "2001:db8::1"},
		{name: "IPv4-compatible IPv6 stays IPv6", in: "::192.0.2.1", want: "::c000:201"},
		{name: "a zoned address is refused", in: "fe80::1%eth0"},
		{name: "an octet over 255 is refused", in: "192.0.2.256"},
		{name: "a hostname is refused", in: "lb.example.com"},
		{name: "a CIDR is refused", in: "192.0.2.0/24"},
		{name: "empty is refused", in: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseIPSloppy(tc.in)
			if tc.want == "" {
				if err == nil || got.IsValid() {
					t.Fatalf("ParseIPSloppy(%q) = %v, %v; want an error", tc.in, got, err)
				}
				return
			}
			if err != nil || got != netip.MustParseAddr(tc.want) {
				t.Errorf("ParseIPSloppy(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestParsePrefixSloppy(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // "" for an error
	}{
		{name: "IPv4 CIDR parses", in: "203.0.113.0/24", want: "203.0.113.0/24"},
		{name: "surrounding spaces are trimmed, as kube-proxy", in: " 203.0.113.0/24 ", want: "203.0.113.0/24"},
		{name: "host bits are cleared", in: "203.0.113.7/24", want: "203.0.113.0/24"},
		{name: "leading zeros are decimal", in: "010.0.0.0/8", want: "10.0.0.0/8"},
		{name: "an IPv4-mapped prefix is its IPv4 prefix", in: "::ffff:203.0.113.0/120", want: "203.0.113.0/24"},
		{name: "an IPv4-mapped prefix shorter than /96 is refused", in: "::ffff:0:0/80"},
		{name: "IPv6 is canonical", in: "2001:DB8::/32", want: "2001:db8::/32"},
		{name: "an address without a length is refused", in: "203.0.113.0"},
		{name: "a length over 32 is refused", in: "203.0.113.0/33"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePrefixSloppy(tc.in)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("ParsePrefixSloppy(%q) = %v; want an error", tc.in, got)
				}
				return
			}
			if err != nil || got != netip.MustParsePrefix(tc.want) {
				t.Errorf("ParsePrefixSloppy(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
			}
		})
	}
}

// leftOut is a warning as the tests compare it: field, reason and a
// part of the message.
type leftOut struct{ field, reason, says string }

func TestServiceAddressesNormalisedBeforeDeciding(t *testing.T) {
	ext := func(ips ...string) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Spec.ExternalIPs = ips }
	}
	ranges := func(r ...string) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = r }
	}
	tests := []struct {
		name       string
		svc        *corev1.Service
		wantExt    []string
		wantLB     []string
		wantRanges []string
		want       []leftOut
	}{
		{
			name:    "an externalIP listed twice is kept once",
			svc:     testService(ext("192.0.2.1", "192.0.2.1")),
			wantExt: []string{"192.0.2.1"},
			want:    []leftOut{{"spec.externalIPs[1]", policy.ReasonDuplicateAddress, "also spec.externalIPs[0]"}},
		},
		{
			name:    "one IPv6 address written two ways is one",
			svc:     testService(ext("2001:db8::1", "2001:DB8:0:0:0:0:0:1")),
			wantExt: []string{"2001:db8::1"},
			want:    []leftOut{{"spec.externalIPs[1]", policy.ReasonDuplicateAddress, "2001:db8::1 is also spec.externalIPs[0]"}},
		},
		{
			name: "an externalIP that is also the LB IP is served as the LB IP, which the source ranges hold",
			svc: testService(ext("198.51.100.1"), withIngress(lbIngress("198.51.100.1", nil)),
				ranges("203.0.113.0/24")),
			wantLB:     []string{"198.51.100.1"},
			wantRanges: []string{"203.0.113.0/24"},
			want:       []leftOut{{"spec.externalIPs[0]", policy.ReasonDuplicateAddress, "also status.loadBalancer.ingress[0].ip"}},
		},
		{
			name:    "a leading-zero IPv4 externalIP is the decimal address",
			svc:     testService(ext("010.001.002.003")),
			wantExt: []string{"10.1.2.3"},
		},
		{
			name:    "an IPv4-mapped externalIP is its IPv4 address",
			svc:     testService(ext("::ffff:192.0.2.7")),
			wantExt: []string{"192.0.2.7"},
		},
		{
			name:    "a malformed externalIP drops that address only, naming its index",
			svc:     testService(ext("192.0.2.1", "192.0.2.256", "", "fe80::1%eth0", "192.0.2.2")),
			wantExt: []string{"192.0.2.1", "192.0.2.2"},
			want: []leftOut{
				{"spec.externalIPs[1]", policy.ReasonInvalidAddress, `"192.0.2.256" is not an IP address; this address left out`},
				{"spec.externalIPs[2]", policy.ReasonInvalidAddress, `"" is not an IP address`},
				{"spec.externalIPs[3]", policy.ReasonInvalidAddress, `zoned address "fe80::1%eth0"`},
			},
		},
		{
			name:    "a long malformed value is quoted cut",
			svc:     testService(ext(strings.Repeat("x", 1000))),
			wantExt: nil,
			want:    []leftOut{{"spec.externalIPs[0]", policy.ReasonInvalidAddress, `x"… (1000 bytes)`}},
		},
		{
			name: "a malformed LB ingress IP drops that address only; the index counts skipped entries",
			svc: testService(withIngress(corev1.LoadBalancerIngress{Hostname: "lb.example.com"},
				lbIngress("192.0.2.10", ptr(corev1.LoadBalancerIPModeProxy)), lbIngress("bad", nil), lbIngress("192.0.2.11", nil))),
			wantLB: []string{"192.0.2.11"},
			want:   []leftOut{{"status.loadBalancer.ingress[2].ip", policy.ReasonInvalidAddress, `"bad" is not an IP address`}},
		},
		{
			name: "loopback, unspecified, link-local, multicast and broadcast externalIPs are refused",
			svc: testService(ext("127.0.0.1", "::1", "0.0.0.0", "::", "169.254.169.254", "fe80::1",
				"224.0.0.1", "ff02::1", "239.1.1.1", "255.255.255.255", "192.0.2.1")),
			wantExt: []string{"192.0.2.1"},
			want: []leftOut{
				{"spec.externalIPs[0]", policy.ReasonRefusedAddress, "127.0.0.1 is a loopback address, which no Service may take"},
				{"spec.externalIPs[1]", policy.ReasonRefusedAddress, "::1 is a loopback address"},
				{"spec.externalIPs[2]", policy.ReasonRefusedAddress, "0.0.0.0 is the unspecified address"},
				{"spec.externalIPs[3]", policy.ReasonRefusedAddress, ":: is the unspecified address"},
				{"spec.externalIPs[4]", policy.ReasonRefusedAddress, "169.254.169.254 is a link-local address"},
				{"spec.externalIPs[5]", policy.ReasonRefusedAddress, "fe80::1 is a link-local address"},
				{"spec.externalIPs[6]", policy.ReasonRefusedAddress, "224.0.0.1 is a multicast address"},
				{"spec.externalIPs[7]", policy.ReasonRefusedAddress, "ff02::1 is a multicast address"},
				{"spec.externalIPs[8]", policy.ReasonRefusedAddress, "239.1.1.1 is a multicast address"},
				{"spec.externalIPs[9]", policy.ReasonRefusedAddress, "255.255.255.255 is the broadcast address"},
			},
		},
		{
			name:   "an LB status IP of loopback is refused, however written",
			svc:    testService(withIngress(lbIngress("127.0.0.1", nil), lbIngress("::ffff:127.0.0.2", nil), lbIngress("0127.0.0.1", nil), lbIngress("192.0.2.11", nil))),
			wantLB: []string{"192.0.2.11"},
			want: []leftOut{
				{"status.loadBalancer.ingress[0].ip", policy.ReasonRefusedAddress, "127.0.0.1 is a loopback address"},
				{"status.loadBalancer.ingress[1].ip", policy.ReasonRefusedAddress, "127.0.0.2 is a loopback address"},
				{"status.loadBalancer.ingress[2].ip", policy.ReasonRefusedAddress, "127.0.0.1 is a loopback address"},
			},
		},
		{
			name:       "source ranges are lenient: spaces, leading zeros, mapped",
			svc:        testService(withIngress(lbIngress("198.51.100.1", nil)), ranges(" 010.0.0.0/8", "::ffff:203.0.113.0/120")),
			wantLB:     []string{"198.51.100.1"},
			wantRanges: []string{"10.0.0.0/8", "203.0.113.0/24"},
		},
		{
			name:       "a malformed source range beside a valid one of the family drops that range only",
			svc:        testService(withIngress(lbIngress("198.51.100.1", nil)), ranges("203.0.113.0/24", "203.0.113.0")),
			wantLB:     []string{"198.51.100.1"},
			wantRanges: []string{"203.0.113.0/24"},
			want:       []leftOut{{"spec.loadBalancerSourceRanges[1]", policy.ReasonInvalidAddress, `"203.0.113.0" is not a CIDR`}},
		},
		{
			name:   "a malformed source range leaving none of the LB IP's family fails closed: the LB IP is not served",
			svc:    testService(withIngress(lbIngress("198.51.100.1", nil), lbIngress("2001:db8::1", nil)), ranges("garbage", "2001:db8:1::/48")),
			wantLB: []string{"2001:db8::1"}, wantRanges: []string{"2001:db8:1::/48"},
			want: []leftOut{
				{"spec.loadBalancerSourceRanges[0]", policy.ReasonInvalidAddress, `"garbage" is not a CIDR`},
				{"status.loadBalancer.ingress[0].ip", policy.ReasonInvalidAddress, "198.51.100.1 not served: spec.loadBalancerSourceRanges has an invalid entry and no valid IPv4 one, so it is served to no client rather than to every client"},
			},
		},
		{
			name:    "a malformed source range leaves externalIPs alone (the ranges never hold them)",
			svc:     testService(ext("192.0.2.1"), ranges("garbage")),
			wantExt: []string{"192.0.2.1"},
			want:    []leftOut{{"spec.loadBalancerSourceRanges[0]", policy.ReasonInvalidAddress, "is not a CIDR"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checkedService(t, tc.svc, "")
			if err != nil {
				t.Fatalf("Service: %v; want the Service kept", err)
			}
			if diff := cmp.Diff(addrs(tc.wantExt...), got.ExternalIPs, cmpOpts...); diff != "" {
				t.Errorf("ExternalIPs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(addrs(tc.wantLB...), got.LoadBalancerIPs, cmpOpts...); diff != "" {
				t.Errorf("LoadBalancerIPs (-want +got):\n%s", diff)
			}
			var wantRanges []netip.Prefix
			for _, r := range tc.wantRanges {
				wantRanges = append(wantRanges, netip.MustParsePrefix(r))
			}
			if diff := cmp.Diff(wantRanges, got.LoadBalancerSourceRanges, cmpOpts...); diff != "" {
				t.Errorf("LoadBalancerSourceRanges (-want +got):\n%s", diff)
			}
			checkLeftOut(t, got.Warnings, svcObj, policy.ServiceKey{Namespace: "shop", Name: "web"}, tc.want)
		})
	}
}

func checkLeftOut(t *testing.T, ws []policy.Warning, obj string, key policy.ServiceKey, want []leftOut) {
	t.Helper()
	if len(ws) != len(want) {
		t.Fatalf("%d warnings, want %d: %v", len(ws), len(want), ws)
	}
	for i, w := range ws {
		if w.Object != obj || w.Service != key || w.Field != want[i].field || w.Reason != want[i].reason ||
			!strings.Contains(w.Message, want[i].says) {
			t.Errorf("warning %d = %+v, want object %q, service %s, field %q, reason %q, saying %q",
				i, w, obj, key, want[i].field, want[i].reason, want[i].says)
		}
		if len(w.Message) > 400 {
			t.Errorf("warning %d is %d bytes long", i, len(w.Message))
		}
	}
}

func TestDropExternalIPsDropsTheirWarnings(t *testing.T) {
	svc := testService(func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"bad", "192.0.2.1"} },
		withIngress(lbIngress("127.0.0.1", nil)))
	got, err := Service(svc, "")
	if err != nil {
		t.Fatal(err)
	}
	DropExternalIPs(got)
	if len(got.ExternalIPs) != 0 || len(got.Warnings) != 1 || got.Warnings[0].Field != "status.loadBalancer.ingress[0].ip" {
		t.Errorf("after DropExternalIPs: ExternalIPs %v, warnings %v; want none, and the LB status one only", got.ExternalIPs, got.Warnings)
	}
}

func TestEndpointSliceRefusedAddressesLeftOutOncePerReason(t *testing.T) {
	slice := testSlice(withEndpoints(ep("127.0.0.1"), ep("10.1.0.1"), ep("127.0.0.2"), ep("224.0.0.5"),
		ep("169.254.169.254"), ep("127.0.0.3"), ep("255.255.255.255"), ep("0.0.0.0")))
	for _, keepValid := range []bool{false, true} {
		var got *policy.EndpointSlice
		var err error
		if keepValid {
			got, _, err = EndpointSliceKeepValid(slice)
		} else {
			got, err = checkedEndpointSlice(t, slice)
		}
		if err != nil {
			t.Fatalf("keepValid %v: %v; want the slice kept", keepValid, err)
		}
		if len(got.Endpoints) != 1 || got.Endpoints[0].Address != netip.MustParseAddr("10.1.0.1") {
			t.Errorf("keepValid %v: endpoints %v, want 10.1.0.1 only", keepValid, got.Endpoints)
		}
		checkLeftOut(t, got.Warnings, "EndpointSlice shop/web-abc12", policy.ServiceKey{Namespace: "shop", Name: "web"}, []leftOut{
			{"endpoints[0].addresses[0]", policy.ReasonRefusedAddress, "127.0.0.1 is a loopback address, which no Service may take; endpoint left out, and 2 more of this slice's for being a loopback address"},
			{"endpoints[3].addresses[0]", policy.ReasonRefusedAddress, "224.0.0.5 is a multicast address, which no Service may take; endpoint left out"},
			{"endpoints[4].addresses[0]", policy.ReasonRefusedAddress, "169.254.169.254 is a link-local address"},
			{"endpoints[6].addresses[0]", policy.ReasonRefusedAddress, "255.255.255.255 is the broadcast address"},
			{"endpoints[7].addresses[0]", policy.ReasonRefusedAddress, "0.0.0.0 is the unspecified address"},
		})
	}
	v6 := testSlice(withAddressType(discoveryv1.AddressTypeIPv6), withEndpoints(ep("fe80::1"), ep("::1"), ep("ff02::1"), ep("fd00::1")))
	got, err := checkedEndpointSlice(t, v6)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Endpoints) != 1 || len(got.Warnings) != 3 {
		t.Errorf("IPv6 slice: endpoints %v, warnings %v; want fd00::1 only, and three warnings", got.Endpoints, got.Warnings)
	}
}
