package policy

import (
	"encoding/json"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// TestProtocolNumbersAreIANAs: TCP, UDP and SCTP map to IP protocol
// numbers 6, 17 and 132 and back; anything else has no number.
func TestProtocolNumbersAreIANAs(t *testing.T) {
	tests := []struct {
		name   string
		proto  Protocol
		number uint8
		ok     bool
	}{
		{"TCP is 6", ProtocolTCP, 6, true},
		{"UDP is 17", ProtocolUDP, 17, true},
		{"SCTP is 132", ProtocolSCTP, 132, true},
		{"lower case is not a protocol", "tcp", 0, false},
		{"an unknown protocol has no number", "ICMP", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, ok := tc.proto.Number()
			if n != tc.number || ok != tc.ok {
				t.Fatalf("%q.Number() = %d, %v; want %d, %v", tc.proto, n, ok, tc.number, tc.ok)
			}
			if !tc.ok {
				return
			}
			if p, ok := ProtocolOfNumber(n); p != tc.proto || !ok {
				t.Errorf("ProtocolOfNumber(%d) = %q, %v; want %q", n, p, ok, tc.proto)
			}
		})
	}
	if p, ok := ProtocolOfNumber(1); ok {
		t.Errorf("ProtocolOfNumber(1) = %q, want none", p)
	}
}

// groups collects what Plan.Services yields, each group cloned.
func groups(p Plan) []ServicePlan {
	var out []ServicePlan
	for svc, vss := range p.Services() {
		out = append(out, ServicePlan{Service: svc, VirtualServers: slices.Clone(vss)})
	}
	return out
}

// TestServicesGroupsInServiceOrder: Plan.Services groups virtual
// servers by service, services in ServiceKey order (namespace, then name:
// "ns" before "ns-a", which a namespace/name string sort reverses), each
// service's virtual servers in plan order.
func TestServicesGroupsInServiceOrder(t *testing.T) {
	a := ServiceKey{Namespace: "ns-a", Name: "x"}
	b := ServiceKey{Namespace: "ns", Name: "x"}
	vs := func(k ServiceKey, port uint16) VirtualServer { return VirtualServer{Service: k, Port: port} }
	p := Plan{VirtualServers: []VirtualServer{vs(a, 1), vs(b, 2), vs(a, 3), vs(b, 4)}}
	got := groups(p)
	if len(got) != 2 || got[0].Service != b || got[1].Service != a {
		t.Fatalf("services = %v, want [%v %v]", got, b, a)
	}
	for i, want := range [][]uint16{{2, 4}, {1, 3}} {
		var ports []uint16
		for _, v := range got[i].VirtualServers {
			ports = append(ports, v.Port)
		}
		if !slices.Equal(ports, want) {
			t.Errorf("%v: ports %v, want %v", got[i].Service, ports, want)
		}
	}
}

// TestServicesGroupsEndAtTheirLast: a yielded group's capacity ends at
// its last virtual server and the group is a copy: an append to it or a
// write into it leaves the plan as it was.
func TestServicesGroupsEndAtTheirLast(t *testing.T) {
	a := ServiceKey{Namespace: "ns", Name: "a"}
	b := ServiceKey{Namespace: "ns", Name: "b"}
	vs := func(k ServiceKey, port uint16) VirtualServer { return VirtualServer{Service: k, Port: port} }
	p := Plan{VirtualServers: []VirtualServer{vs(a, 1), vs(b, 2), vs(a, 3)}}
	for svc, vss := range p.Services() {
		if cap(vss) != len(vss) {
			t.Errorf("%v's group: capacity %d past its %d virtual servers", svc, cap(vss), len(vss))
		}
		vss[0].Port = 7
	}
	if p.VirtualServers[0].Port != 1 || p.VirtualServers[1].Port != 2 {
		t.Errorf("a write into a group wrote into the plan: %v", p.VirtualServers)
	}
}

// TestServiceKeyTextRoundTrips: a ServiceKey is namespace/name in JSON
// and reads back; anything else is an error.
func TestServiceKeyTextRoundTrips(t *testing.T) {
	k := ServiceKey{Namespace: "kube-system", Name: "dns"}
	b, err := json.Marshal(HealthCheck{Service: k})
	if err != nil || !strings.Contains(string(b), `"service":"kube-system/dns"`) {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
	var hc HealthCheck
	if err := json.Unmarshal(b, &hc); err != nil || hc.Service != k {
		t.Fatalf("Unmarshal = %v, %v", hc.Service, err)
	}
	for _, bad := range []string{`"dns"`, `"/dns"`, `"ns/"`} {
		if err := json.Unmarshal([]byte(`{"service":`+bad+`}`), &hc); err == nil {
			t.Errorf("Unmarshal(%s) succeeded", bad)
		}
	}
}

// TestServicesYieldsEveryGroupWithoutACopy: Plan.Services yields every
// virtual server once, in its service's group, each group in plan order,
// and allocates no copy of the plan's virtual servers: only the order and
// one group's buffer.
func TestServicesYieldsEveryGroupWithoutACopy(t *testing.T) {
	vs := func(k ServiceKey, port uint16) VirtualServer { return VirtualServer{Service: k, Port: port} }
	var big Plan
	for i := range 1000 {
		big.VirtualServers = append(big.VirtualServers, vs(ServiceKey{Namespace: "ns", Name: string(rune('a' + i%26))}, uint16(i)))
	}
	tests := []struct {
		name string
		plan Plan
	}{
		{"empty", Plan{}},
		{"interleaved services", Plan{VirtualServers: []VirtualServer{
			vs(ServiceKey{Namespace: "ns-a", Name: "x"}, 1), vs(ServiceKey{Namespace: "ns", Name: "x"}, 2),
			vs(ServiceKey{Namespace: "ns-a", Name: "x"}, 3), vs(ServiceKey{Namespace: "ns", Name: "x"}, 4)}}},
		{"26 services of a thousand virtual servers", big},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// want: the plan's virtual servers, stably sorted by service.
			want := slices.Clone(tc.plan.VirtualServers)
			slices.SortStableFunc(want, func(a, b VirtualServer) int { return a.Service.Compare(b.Service) })
			var got []VirtualServer
			for svc, vss := range tc.plan.Services() {
				for _, v := range vss {
					if v.Service != svc {
						t.Errorf("%v's group holds %v's virtual server", svc, v.Service)
					}
				}
				got = append(got, vss...)
			}
			for i := range max(len(got), len(want)) {
				if i >= len(got) || i >= len(want) || got[i].Service != want[i].Service || got[i].Port != want[i].Port {
					t.Fatalf("%d virtual servers yielded, want %d; the first to differ is the %dth", len(got), len(want), i)
				}
			}
		})
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	n := 0
	for _, vss := range big.Services() {
		n += len(vss)
	}
	runtime.ReadMemStats(&after)
	planBytes := uint64(len(big.VirtualServers)) * uint64(unsafe.Sizeof(VirtualServer{}))
	if got := after.TotalAlloc - before.TotalAlloc; n != len(big.VirtualServers) || got >= planBytes/2 {
		t.Errorf("%d virtual servers yielded with %d bytes allocated, want all %d with less than half the plan's %d",
			n, got, len(big.VirtualServers), planBytes)
	}
}
