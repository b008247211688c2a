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

// TestByServiceGroupsInServiceOrder: Plan.ByService groups virtual
// servers by service, services in ServiceKey order (namespace, then name:
// "ns" before "ns-a", which a namespace/name string sort reverses), each
// service's virtual servers in plan order.
func TestByServiceGroupsInServiceOrder(t *testing.T) {
	a := ServiceKey{Namespace: "ns-a", Name: "x"}
	b := ServiceKey{Namespace: "ns", Name: "x"}
	vs := func(k ServiceKey, port uint16) VirtualServer { return VirtualServer{Service: k, Port: port} }
	p := Plan{VirtualServers: []VirtualServer{vs(a, 1), vs(b, 2), vs(a, 3), vs(b, 4)}}
	got := p.ByService()
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

// TestByServiceGroupsEndAtTheirLast: the groups share one copy of the
// plan's virtual servers, so each one's capacity ends at its last: an
// append to one group leaves the next one, and the plan, as they were.
func TestByServiceGroupsEndAtTheirLast(t *testing.T) {
	a := ServiceKey{Namespace: "ns", Name: "a"}
	b := ServiceKey{Namespace: "ns", Name: "b"}
	vs := func(k ServiceKey, port uint16) VirtualServer { return VirtualServer{Service: k, Port: port} }
	p := Plan{VirtualServers: []VirtualServer{vs(a, 1), vs(b, 2), vs(a, 3)}}
	got := p.ByService()
	grown := append(got[0].VirtualServers, vs(a, 99))
	if len(grown) != 3 || got[1].VirtualServers[0].Port != 2 || p.VirtualServers[1].Port != 2 {
		t.Errorf("an append to %v's group wrote into %v's: %v", a, b, got[1].VirtualServers)
	}
	got[0].VirtualServers[0].Port = 7
	if p.VirtualServers[0].Port != 1 {
		t.Errorf("a group is the plan's own list, not a copy: plan's port %d", p.VirtualServers[0].Port)
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

// TestServicesYieldsByServicesGroupsWithoutACopy: Plan.Services yields
// the groups of ByService, in its order, and allocates no copy of the
// plan's virtual servers: only the order and one group's buffer.
func TestServicesYieldsByServicesGroupsWithoutACopy(t *testing.T) {
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
			var got []ServicePlan
			for svc, vss := range tc.plan.Services() {
				got = append(got, ServicePlan{Service: svc, VirtualServers: slices.Clone(vss)})
			}
			want := tc.plan.ByService()
			if len(got) != len(want) {
				t.Fatalf("%d groups, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i].Service != want[i].Service || !slices.EqualFunc(got[i].VirtualServers, want[i].VirtualServers,
					func(a, b VirtualServer) bool { return a.Service == b.Service && a.Port == b.Port }) {
					t.Errorf("group %d: %v, want %v", i, got[i], want[i])
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
