//go:build integration

package traffic

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/apiconv"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// TestAddressesNormalisedFromObjects: Services converted from API
// objects by apiconv, planned and programmed by the real data plane. One
// lists an external IP three times (twice alike, once with leading
// zeros): it is programmed once, with no Service failing, and the client
// reaches its endpoints through it. Another's LoadBalancer status says
// 127.0.0.1: no virtual server is on it and kube-ipvs0 holds no such
// address, so nothing on the node's loopback is taken.
func TestAddressesNormalisedFromObjects(t *testing.T) {
	l := newLab(t)
	extIP := netip.MustParseAddr("198.51.100.41") // the client routes 198.51.100.0/24 via node-a
	ports := []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}, {Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53}}
	dup := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "dup-ext"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.16.1", ClusterIPs: []string{"10.96.16.1"}, Ports: ports,
			ExternalIPs: []string{"198.51.100.41", "198.51.100.41", "198.51.100.041"}}}
	loop := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "loopback-lb"},
		Spec:   corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.16.2", ClusterIPs: []string{"10.96.16.2"}, Ports: ports},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "127.0.0.1"}}}}}
	for _, obj := range []*corev1.Service{dup, loop} {
		s, err := apiconv.Service(obj, "")
		if err != nil {
			t.Fatalf("convert %s: %v", obj.Name, err)
		}
		for _, w := range s.Warnings {
			t.Logf("conversion warning: %s (%s)", w, w.Reason)
		}
		l.engine.UpsertService(s)
		l.setEndpoints(s.Key, l.ep("pod-a1"), l.ep("pod-b1"))
	}
	plan, ws := l.engine.Compute()
	reasons := map[string]int{}
	for _, w := range ws {
		reasons[w.Reason]++
	}
	if reasons[policy.ReasonDuplicateAddress] != 2 || reasons[policy.ReasonRefusedAddress] != 1 {
		t.Errorf("plan warnings %v, want two DuplicateAddress and one RefusedAddress", ws)
	}
	if err := l.dp.Resync(plan); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	if f := l.dp.ServiceFailures(); len(f) > 0 {
		t.Fatalf("Services failing after the Resync: %v", f)
	}
	dupKey := policy.ServiceKey{Namespace: "default", Name: "dup-ext"}
	l.apply(dupKey) // an incremental sync of it, as after an edit
	if f := l.dp.ServiceFailures(); len(f) > 0 {
		t.Fatalf("Services failing after an incremental Apply: %v", f)
	}

	onExt := ipvsPortsOn(t, extIP)
	onLoopback := ipvsPortsWhere(t, netip.Addr.IsLoopback)
	if len(onExt) != 2 { // TCP 80 and UDP 53
		t.Errorf("IPVS virtual servers on %s: %v, want one per port (two)", extIP, onExt)
	}
	if len(onLoopback) > 0 {
		t.Errorf("IPVS virtual servers on loopback: %v, want none", onLoopback)
	}
	onDummy := kubeIPVS0Addrs(t)
	if n := len(slices.DeleteFunc(slices.Clone(onDummy), func(a netip.Addr) bool { return a != extIP })); n != 1 {
		t.Errorf("kube-ipvs0 holds %s %d times (%v), want once", extIP, n, onDummy)
	}
	if slices.ContainsFunc(onDummy, netip.Addr.IsLoopback) {
		t.Errorf("kube-ipvs0 holds a loopback address: %v", onDummy)
	}
	t.Logf("IPVS on %s: %v; kube-ipvs0: %v", extIP, onExt, onDummy)

	l.expectOnly(t, l.client, net.JoinHostPort(extIP.String(), "80"), TCP, 12, "pod-a1", "pod-b1")
	l.expectOnly(t, l.client, net.JoinHostPort(extIP.String(), "53"), UDP, 12, "pod-a1", "pod-b1")
}
