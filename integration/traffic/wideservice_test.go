//go:build integration

package traffic

import (
	"fmt"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/apiconv"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/cmd/kube-ipvs-proxy/app"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// wideUDPPorts is a VoIP media range's worth of UDP ports: kube-proxy
// serves such a Service, so a drop-in must by default.
const wideUDPPorts = 600

// TestWideDualStackServiceServedByDefault: a dual-stack Service with 600
// UDP ports, converted from its object and planned under the default
// per-Service budget (--max-virtual-servers-per-service), is programmed
// whole: 1,200 virtual servers in the kernel, no Service failing, and a
// client's datagram to the last port of each family reaches an endpoint.
func TestWideDualStackServiceServedByDefault(t *testing.T) {
	l := newLab(t, func(c *policy.Config) { c.MaxVirtualServers = app.DefaultMaxVirtualServersPerService })
	vip4, vip6 := "10.96.17.1", "fd00:96::17:1"
	obj := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "media"},
		Spec: corev1.ServiceSpec{ClusterIP: vip4, ClusterIPs: []string{vip4, vip6}}}
	slicePorts := make([]policy.EndpointPort, 0, wideUDPPorts)
	for i := range wideUDPPorts {
		name := fmt.Sprintf("rtp-%d", i)
		obj.Spec.Ports = append(obj.Spec.Ports, corev1.ServicePort{Name: name, Protocol: corev1.ProtocolUDP, Port: int32(20000 + i)})
		slicePorts = append(slicePorts, policy.EndpointPort{Name: name, Protocol: policy.ProtocolUDP, Port: podUDPPort})
	}
	s, err := apiconv.Service(obj, "")
	if err != nil {
		t.Fatalf("convert: %v", err)
	}
	if ws := l.engine.UpsertService(s); len(ws) > 0 {
		t.Fatalf("warnings: %v", ws)
	}
	for _, v4 := range []bool{true, false} {
		ep := l.ep("pod-b1")
		if !v4 {
			ep = l.ep6("pod-b1")
		}
		l.engine.UpsertEndpointSlice(&policy.EndpointSlice{Name: fmt.Sprintf("media-v%v", v4), Service: s.Key, IPv4: v4,
			Ports: slicePorts, Endpoints: []policy.Endpoint{ep}})
	}
	plan, ws := l.engine.Compute()
	if len(ws) > 0 {
		t.Fatalf("plan warnings (a refusal would be TooManyVirtualServers): %v", ws)
	}
	if err := l.dp.Resync(plan); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	if f := l.dp.ServiceFailures(); len(f) > 0 {
		t.Fatalf("Services failing: %v", f)
	}
	perVIP := map[netip.Addr]int{}
	for _, vip := range []string{vip4, vip6} {
		a := netip.MustParseAddr(vip)
		if perVIP[a] = len(ipvsPortsOn(t, a)); perVIP[a] != wideUDPPorts {
			t.Errorf("IPVS virtual servers on %s: %d, want %d", vip, perVIP[a], wideUDPPorts)
		}
	}
	t.Logf("IPVS: %d virtual servers on %s, %d on %s", perVIP[netip.MustParseAddr(vip4)], vip4, perVIP[netip.MustParseAddr(vip6)], vip6)
	last := 20000 + wideUDPPorts - 1
	l.expectOnly(t, l.pod("pod-a3"), hostPort(netip.MustParseAddr(vip4), last), UDP, 4, "pod-b1")
	l.expectOnly(t, l.pod("pod-a3"), hostPort(netip.MustParseAddr(vip6), last), UDP, 4, "pod-b1")
}
