package apiconv

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

const sliceObj = "EndpointSlice shop/web-abc12"

// testSlice is a valid IPv4 EndpointSlice shop/web-abc12 of Service
// shop/web with one TCP port and one endpoint, changed by muts.
func testSlice(muts ...func(*discoveryv1.EndpointSlice)) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "shop", Name: "web-abc12",
			Labels: map[string]string{LabelServiceName: "web"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(8080))}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1"}}},
	}
	for _, m := range muts {
		m(s)
	}
	return s
}

// wantSlice is what testSlice converts to, changed by muts.
func wantSlice(muts ...func(*policy.EndpointSlice)) *policy.EndpointSlice {
	s := &policy.EndpointSlice{
		Name:      "web-abc12",
		Service:   policy.ServiceKey{Namespace: "shop", Name: "web"},
		IPv4:      true,
		Ports:     []policy.EndpointPort{{Name: "http", Protocol: policy.ProtocolTCP, Port: 8080}},
		Endpoints: []policy.Endpoint{{Address: addrs("10.1.0.1")[0], Ready: true, Serving: true}},
	}
	for _, m := range muts {
		m(s)
	}
	return s
}

func withAddressType(t discoveryv1.AddressType) func(*discoveryv1.EndpointSlice) {
	return func(s *discoveryv1.EndpointSlice) { s.AddressType = t }
}

func withEndpoints(eps ...discoveryv1.Endpoint) func(*discoveryv1.EndpointSlice) {
	return func(s *discoveryv1.EndpointSlice) { s.Endpoints = eps }
}

func withEPPorts(ports ...discoveryv1.EndpointPort) func(*discoveryv1.EndpointSlice) {
	return func(s *discoveryv1.EndpointSlice) { s.Ports = ports }
}

func ep(addresses ...string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: addresses}
}

func epWithConditions(ready, serving, terminating *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{
		Addresses:  []string{"10.1.0.1"},
		Conditions: discoveryv1.EndpointConditions{Ready: ready, Serving: serving, Terminating: terminating},
	}
}

func withEndpoint(e policy.Endpoint) func(*policy.EndpointSlice) {
	return func(s *policy.EndpointSlice) { s.Endpoints = []policy.Endpoint{e} }
}

func TestEndpointSliceIgnored(t *testing.T) {
	tests := []struct {
		name  string
		slice *discoveryv1.EndpointSlice
	}{
		{
			name:  "slice without service-name label is ignored",
			slice: testSlice(func(s *discoveryv1.EndpointSlice) { s.Labels = nil }),
		},
		{
			name:  "slice with empty service-name label is ignored",
			slice: testSlice(func(s *discoveryv1.EndpointSlice) { s.Labels[LabelServiceName] = "" }),
		},
		{
			name: "slice without service-name label is ignored before validation",
			slice: testSlice(func(s *discoveryv1.EndpointSlice) { s.Labels = map[string]string{"app": "web"} },
				withAddressType("bogus"), withEndpoints(ep("not-an-ip"))),
		},
		{
			name:  "FQDN slice is ignored",
			slice: testSlice(withAddressType(discoveryv1.AddressTypeFQDN), withEndpoints(ep("db.example.com"))),
		},
		{
			name: "FQDN slice is ignored even with invalid ports",
			slice: testSlice(withAddressType(discoveryv1.AddressTypeFQDN),
				withEPPorts(discoveryv1.EndpointPort{Port: ptr(int32(0))})),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checkedEndpointSlice(t, tc.slice)
			if err != nil || got != nil {
				t.Errorf("EndpointSlice = (%+v, %v), want (nil, nil)", got, err)
			}
		})
	}
}

func TestEndpointSliceInvalid(t *testing.T) {
	tests := []struct {
		name      string
		slice     *discoveryv1.EndpointSlice
		wantObj   string
		wantField string
	}{
		{
			name:      "empty name is invalid",
			slice:     testSlice(func(s *discoveryv1.EndpointSlice) { s.Name = "" }),
			wantObj:   "EndpointSlice shop/",
			wantField: "metadata.name",
		},
		{
			name:      "empty name is invalid even without the service-name label",
			slice:     testSlice(func(s *discoveryv1.EndpointSlice) { s.Name, s.Labels = "", nil }),
			wantObj:   "EndpointSlice shop/",
			wantField: "metadata.name",
		},
		{
			name:      "unknown addressType is invalid",
			slice:     testSlice(withAddressType("IPX")),
			wantField: "addressType",
		},
		{
			name:      "empty addressType is invalid",
			slice:     testSlice(withAddressType("")),
			wantField: "addressType",
		},
		{
			name:      "lower-case addressType is invalid",
			slice:     testSlice(withAddressType("ipv4")),
			wantField: "addressType",
		},
		// Addresses.
		{
			name:      "IPv6 address in IPv4 slice is invalid",
			slice:     testSlice(withEndpoints(ep("10.1.0.1"), ep("fd00::1"))),
			wantField: "endpoints[1].addresses[0]",
		},
		{
			name:      "IPv4 address in IPv6 slice is invalid",
			slice:     testSlice(withAddressType(discoveryv1.AddressTypeIPv6), withEndpoints(ep("10.1.0.1"))),
			wantField: "endpoints[0].addresses[0]",
		},
		{
			name:      "IPv4-mapped IPv6 address in IPv6 slice is refused",
			slice:     testSlice(withAddressType(discoveryv1.AddressTypeIPv6), withEndpoints(ep("::ffff:10.1.0.1"))),
			wantField: "endpoints[0].addresses[0]",
		},
		{
			name:      "IPv4-mapped IPv6 address in IPv4 slice is refused",
			slice:     testSlice(withEndpoints(ep("::ffff:10.1.0.1"))),
			wantField: "endpoints[0].addresses[0]",
		},
		{
			name:      "zoned address is refused",
			slice:     testSlice(withAddressType(discoveryv1.AddressTypeIPv6), withEndpoints(ep("fe80::1%eth0"))),
			wantField: "endpoints[0].addresses[0]",
		},
		{
			name:      "unparsable address is invalid",
			slice:     testSlice(withEndpoints(ep("10.1.0.1"), ep("10.1.0.1"), ep("pod.example.com"))),
			wantField: "endpoints[2].addresses[0]",
		},
		{
			name:      "empty address string is invalid",
			slice:     testSlice(withEndpoints(ep(""))),
			wantField: "endpoints[0].addresses[0]",
		},
		{
			name:      "endpoint without addresses is invalid",
			slice:     testSlice(withEndpoints(ep("10.1.0.1"), ep())),
			wantField: "endpoints[1].addresses",
		},
		{
			name:      "endpoint with empty addresses list is invalid",
			slice:     testSlice(withEndpoints(discoveryv1.Endpoint{Addresses: []string{}})),
			wantField: "endpoints[0].addresses",
		},
		// Ports.
		{
			name:      "port 0 is invalid",
			slice:     testSlice(withEPPorts(discoveryv1.EndpointPort{Name: ptr("http"), Port: ptr(int32(0))})),
			wantField: "ports[0].port",
		},
		{
			name:      "negative port is invalid",
			slice:     testSlice(withEPPorts(discoveryv1.EndpointPort{Port: ptr(int32(-1))})),
			wantField: "ports[0].port",
		},
		{
			name: "port 65536 names its index",
			slice: testSlice(withEPPorts(
				discoveryv1.EndpointPort{Name: ptr("a"), Port: ptr(int32(80))},
				discoveryv1.EndpointPort{Name: ptr("b"), Port: ptr(int32(65536))},
			)),
			wantField: "ports[1].port",
		},
		{
			name:      "unknown protocol is invalid",
			slice:     testSlice(withEPPorts(discoveryv1.EndpointPort{Protocol: ptr(corev1.Protocol("ICMP")), Port: ptr(int32(80))})),
			wantField: "ports[0].protocol",
		},
		{
			name:      "unknown protocol is invalid even on a nil port",
			slice:     testSlice(withEPPorts(discoveryv1.EndpointPort{Protocol: ptr(corev1.Protocol("tcp"))})),
			wantField: "ports[0].protocol",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := tc.wantObj
			if obj == "" {
				obj = sliceObj
			}
			got, err := checkedEndpointSlice(t, tc.slice)
			checkObjectError(t, err, policy.ErrInvalid, obj, tc.wantField)
			if got != nil {
				t.Errorf("got slice %+v with error", got)
			}
		})
	}
}

func TestEndpointSliceErrorStrings(t *testing.T) {
	tests := []struct {
		name  string
		slice *discoveryv1.EndpointSlice
		want  string
	}{
		{
			name:  "IPv6 address in IPv4 slice message names the wanted family",
			slice: testSlice(withEndpoints(ep("fd00::1"))),
			want:  "EndpointSlice shop/web-abc12: endpoints[0].addresses[0]: fd00::1 is not an IPv4 address",
		},
		{
			name:  "IPv4 address in IPv6 slice message names the wanted family",
			slice: testSlice(withAddressType(discoveryv1.AddressTypeIPv6), withEndpoints(ep("10.1.0.1"))),
			want:  "EndpointSlice shop/web-abc12: endpoints[0].addresses[0]: 10.1.0.1 is not an IPv6 address",
		},
		{
			name:  "unknown addressType message quotes it",
			slice: testSlice(withAddressType("IPX")),
			want:  `EndpointSlice shop/web-abc12: addressType: unsupported address type "IPX"`,
		},
		{
			name:  "port out of range message gives the value",
			slice: testSlice(withEPPorts(discoveryv1.EndpointPort{Port: ptr(int32(0))})),
			want:  "EndpointSlice shop/web-abc12: ports[0].port: must be 1-65535, got 0",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := checkedEndpointSlice(t, tc.slice)
			if err == nil {
				t.Fatalf("got nil error, want %q", tc.want)
			}
			if !errors.Is(err, policy.ErrInvalid) {
				t.Errorf("error %q does not wrap ErrInvalid", err)
			}
			if err.Error() != tc.want {
				t.Errorf("error =\n  %s\nwant\n  %s", err, tc.want)
			}
		})
	}
}

func TestEndpointSlice(t *testing.T) {
	tests := []struct {
		name  string
		slice *discoveryv1.EndpointSlice
		want  *policy.EndpointSlice
	}{
		{
			name:  "plain IPv4 slice converts",
			slice: testSlice(),
			want:  wantSlice(),
		},
		{
			name: "IPv6 slice converts with IPv4 false",
			slice: testSlice(withAddressType(discoveryv1.AddressTypeIPv6),
				withEndpoints(ep("fd00::1"), ep("fd00::2"))),
			want: wantSlice(func(s *policy.EndpointSlice) {
				s.IPv4 = false
				s.Endpoints = []policy.Endpoint{
					{Address: addrs("fd00::1")[0], Ready: true, Serving: true},
					{Address: addrs("fd00::2")[0], Ready: true, Serving: true},
				}
			}),
		},
		{
			name: "service key comes from the service-name label, not the slice name",
			slice: testSlice(func(s *discoveryv1.EndpointSlice) {
				s.Name = "anything"
				s.Labels[LabelServiceName] = "api"
			}),
			want: wantSlice(func(s *policy.EndpointSlice) {
				s.Name = "anything"
				s.Service.Name = "api"
			}),
		},
		{
			name:  "slice without endpoints converts with no endpoints",
			slice: testSlice(withEndpoints()),
			want:  wantSlice(func(s *policy.EndpointSlice) { s.Endpoints = nil }),
		},
		{
			name:  "only the first address of an endpoint is used",
			slice: testSlice(withEndpoints(ep("10.1.0.1", "10.1.0.2", "not-an-ip", "fd00::1"))),
			want:  wantSlice(),
		},
		// Ports.
		{
			name:  "slice without ports converts with no ports",
			slice: testSlice(withEPPorts()),
			want:  wantSlice(func(s *policy.EndpointSlice) { s.Ports = nil }),
		},
		{
			name: "nil port is skipped",
			slice: testSlice(withEPPorts(
				discoveryv1.EndpointPort{Name: ptr("all")},
				discoveryv1.EndpointPort{Name: ptr("http"), Port: ptr(int32(8080))},
			)),
			want: wantSlice(),
		},
		{
			name:  "nil protocol defaults to TCP",
			slice: testSlice(withEPPorts(discoveryv1.EndpointPort{Name: ptr("http"), Port: ptr(int32(8080))})),
			want:  wantSlice(),
		},
		{
			name: "empty protocol defaults to TCP",
			slice: testSlice(withEPPorts(discoveryv1.EndpointPort{
				Name: ptr("http"), Protocol: ptr(corev1.Protocol("")), Port: ptr(int32(8080)),
			})),
			want: wantSlice(),
		},
		{
			name:  "nil name is the empty name",
			slice: testSlice(withEPPorts(discoveryv1.EndpointPort{Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(8080))})),
			want:  wantSlice(func(s *policy.EndpointSlice) { s.Ports[0].Name = "" }),
		},
		{
			name: "UDP and SCTP ports and bounds 1 and 65535 convert in order",
			slice: testSlice(withEPPorts(
				discoveryv1.EndpointPort{Name: ptr("dns"), Protocol: ptr(corev1.ProtocolUDP), Port: ptr(int32(1))},
				discoveryv1.EndpointPort{Name: ptr("sig"), Protocol: ptr(corev1.ProtocolSCTP), Port: ptr(int32(65535))},
			)),
			want: wantSlice(func(s *policy.EndpointSlice) {
				s.Ports = []policy.EndpointPort{
					{Name: "dns", Protocol: policy.ProtocolUDP, Port: 1},
					{Name: "sig", Protocol: policy.ProtocolSCTP, Port: 65535},
				}
			}),
		},
		{
			name: "appProtocol does not affect the result",
			slice: testSlice(withEPPorts(discoveryv1.EndpointPort{
				Name: ptr("http"), Port: ptr(int32(8080)), AppProtocol: ptr("kubernetes.io/h2c"),
			})),
			want: wantSlice(),
		},
		// Conditions.
		{
			name:  "ready nil counts as true",
			slice: testSlice(withEndpoints(epWithConditions(nil, ptr(true), ptr(false)))),
			want:  wantSlice(),
		},
		{
			name:  "all conditions nil give ready, serving, not terminating",
			slice: testSlice(withEndpoints(epWithConditions(nil, nil, nil))),
			want:  wantSlice(),
		},
		{
			name:  "serving nil counts as ready when ready is true",
			slice: testSlice(withEndpoints(epWithConditions(ptr(true), nil, nil))),
			want:  wantSlice(),
		},
		{
			name:  "serving nil counts as ready when ready is false",
			slice: testSlice(withEndpoints(epWithConditions(ptr(false), nil, nil))),
			want: wantSlice(withEndpoint(policy.Endpoint{
				Address: addrs("10.1.0.1")[0], Ready: false, Serving: false,
			})),
		},
		{
			name:  "terminating nil counts as false",
			slice: testSlice(withEndpoints(epWithConditions(ptr(false), ptr(true), nil))),
			want: wantSlice(withEndpoint(policy.Endpoint{
				Address: addrs("10.1.0.1")[0], Ready: false, Serving: true,
			})),
		},
		{
			name:  "explicit ready false is kept",
			slice: testSlice(withEndpoints(epWithConditions(ptr(false), ptr(false), ptr(false)))),
			want: wantSlice(withEndpoint(policy.Endpoint{
				Address: addrs("10.1.0.1")[0],
			})),
		},
		{
			name:  "explicit serving and terminating while not ready are kept",
			slice: testSlice(withEndpoints(epWithConditions(ptr(false), ptr(true), ptr(true)))),
			want: wantSlice(withEndpoint(policy.Endpoint{
				Address: addrs("10.1.0.1")[0], Serving: true, Terminating: true,
			})),
		},
		{
			name:  "explicit serving false overrides ready true",
			slice: testSlice(withEndpoints(epWithConditions(ptr(true), ptr(false), nil))),
			want: wantSlice(withEndpoint(policy.Endpoint{
				Address: addrs("10.1.0.1")[0], Ready: true,
			})),
		},
		{
			name:  "explicit terminating true with nil ready and serving is kept",
			slice: testSlice(withEndpoints(epWithConditions(nil, nil, ptr(true)))),
			want: wantSlice(withEndpoint(policy.Endpoint{
				Address: addrs("10.1.0.1")[0], Ready: true, Serving: true, Terminating: true,
			})),
		},
		// Topology.
		{
			name: "nodeName and zone are copied",
			slice: testSlice(withEndpoints(discoveryv1.Endpoint{
				Addresses: []string{"10.1.0.1"}, NodeName: ptr("node-a"), Zone: ptr("zone-1"),
			})),
			want: wantSlice(withEndpoint(policy.Endpoint{
				Address: addrs("10.1.0.1")[0], Ready: true, Serving: true, Place: &policy.Place{NodeName: "node-a", Zone: "zone-1"},
			})),
		},
		{
			name: "hints forZones and forNodes are copied in order",
			slice: testSlice(withEndpoints(discoveryv1.Endpoint{
				Addresses: []string{"10.1.0.1"},
				Hints: &discoveryv1.EndpointHints{
					ForZones: []discoveryv1.ForZone{{Name: "zone-1"}, {Name: "zone-2"}},
					ForNodes: []discoveryv1.ForNode{{Name: "node-a"}, {Name: "node-b"}},
				},
			})),
			want: wantSlice(withEndpoint(policy.Endpoint{
				Address: addrs("10.1.0.1")[0], Ready: true, Serving: true,
				Hints: &policy.Hints{ForZones: []string{"zone-1", "zone-2"}, ForNodes: []string{"node-a", "node-b"}},
			})),
		},
		{
			name: "hints with only forZones leave forNodes empty",
			slice: testSlice(withEndpoints(discoveryv1.Endpoint{
				Addresses: []string{"10.1.0.1"},
				Hints:     &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-1"}}},
			})),
			want: wantSlice(withEndpoint(policy.Endpoint{
				Address: addrs("10.1.0.1")[0], Ready: true, Serving: true, Hints: &policy.Hints{ForZones: []string{"zone-1"}},
			})),
		},
		{
			name: "empty hints give no forZones or forNodes",
			slice: testSlice(withEndpoints(discoveryv1.Endpoint{
				Addresses: []string{"10.1.0.1"}, Hints: &discoveryv1.EndpointHints{},
			})),
			want: wantSlice(),
		},
		{
			name: "each endpoint keeps its own fields",
			slice: testSlice(withEndpoints(
				discoveryv1.Endpoint{
					Addresses: []string{"10.1.0.1"}, NodeName: ptr("node-a"),
					Hints: &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-1"}}},
				},
				discoveryv1.Endpoint{
					Addresses: []string{"10.1.0.2"}, Zone: ptr("zone-2"),
					Conditions: discoveryv1.EndpointConditions{Ready: ptr(false), Terminating: ptr(true)},
				},
			)),
			want: wantSlice(func(s *policy.EndpointSlice) {
				s.Endpoints = []policy.Endpoint{
					{Address: addrs("10.1.0.1")[0], Ready: true, Serving: true, Place: &policy.Place{NodeName: "node-a"}, Hints: &policy.Hints{ForZones: []string{"zone-1"}}},
					{Address: addrs("10.1.0.2")[0], Terminating: true, Place: &policy.Place{Zone: "zone-2"}},
				}
			}),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checkedEndpointSlice(t, tc.slice)
			if err != nil {
				t.Fatalf("EndpointSlice: unexpected error %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmpOpts...); diff != "" {
				t.Errorf("EndpointSlice mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEndpointSliceDoesNotShareHintSlices(t *testing.T) {
	in := testSlice(withEndpoints(discoveryv1.Endpoint{
		Addresses: []string{"10.1.0.1"},
		Hints:     &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-1"}}},
	}))
	got, err := EndpointSlice(in)
	if err != nil {
		t.Fatal(err)
	}
	in.Endpoints[0].Hints.ForZones[0].Name = "changed"
	if z := got.Endpoints[0].ForZones(); len(z) != 1 || z[0] != "zone-1" {
		t.Errorf("ForZones = %v after changing the input, want [zone-1]", z)
	}
}

// TestEndpointSliceKeepValid: an invalid endpoint is left out with an
// error naming it, and the slice keeps its valid ones; EndpointSlice
// refuses the whole slice.
func TestEndpointSliceKeepValid(t *testing.T) {
	tests := []struct {
		name      string
		endpoints []discoveryv1.Endpoint
		wantKept  []string
		wantBad   []string
	}{
		{"every endpoint valid", []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1"}}, {Addresses: []string{"10.1.0.2"}}},
			[]string{"10.1.0.1", "10.1.0.2"}, nil},
		{"a bad address is left out, the others kept",
			[]discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1"}}, {Addresses: []string{"fd00::1"}}, {Addresses: []string{"10.1.0.3"}}},
			[]string{"10.1.0.1", "10.1.0.3"}, []string{"endpoints[1].addresses[0]: fd00::1 is not an IPv4 address"}},
		{"an endpoint without addresses is left out",
			[]discoveryv1.Endpoint{{}, {Addresses: []string{"10.1.0.2"}}},
			[]string{"10.1.0.2"}, []string{"endpoints[0].addresses: must not be empty"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := testSlice(withEndpoints(tc.endpoints...))
			got, bad, err := EndpointSliceKeepValid(in)
			if err != nil {
				t.Fatal(err)
			}
			var kept []string
			for _, ep := range got.Endpoints {
				kept = append(kept, ep.Address.String())
			}
			if diff := cmp.Diff(tc.wantKept, kept); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
			if len(bad) != len(tc.wantBad) {
				t.Fatalf("bad = %v, want %v", bad, tc.wantBad)
			}
			for i, w := range tc.wantBad {
				if !strings.Contains(bad[i].Error(), w) || !errors.Is(bad[i], policy.ErrInvalid) {
					t.Errorf("bad[%d] = %v, want ErrInvalid containing %q", i, bad[i], w)
				}
			}
			if _, err := EndpointSlice(in); (err != nil) != (len(tc.wantBad) > 0) {
				t.Errorf("EndpointSlice error = %v, want one exactly when an endpoint is bad", err)
			}
		})
	}
}
