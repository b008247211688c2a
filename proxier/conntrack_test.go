package proxier

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/apiconv"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/udpflows"
)

// dnsService is default/dns: UDP port dns 53 on 10.96.0.53, NodePort
// 30053.
func dnsService() *corev1.Service {
	return service("dns", "10.96.0.53", func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.Ports = []corev1.ServicePort{{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, NodePort: 30053}}
	})
}

// udpEp is an endpoint of dnsSlice: its address and conditions.
type udpEp struct {
	addr                        string
	ready, serving, terminating bool
}

func readyEp(addr string) udpEp       { return udpEp{addr, true, true, false} }
func terminatingEp(addr string) udpEp { return udpEp{addr, false, true, true} }

// dnsSlice is default/dns's slice: port dns UDP 5353.
func dnsSlice(eps ...udpEp) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "dns-1", Labels: map[string]string{apiconv.LabelServiceName: "dns"}}, AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("dns"), Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To[int32](5353)}},
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{e.addr}, NodeName: ptr.To("node-b"),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(e.ready), Serving: ptr.To(e.serving), Terminating: ptr.To(e.terminating)}})
	}
	return s
}

// udpFlow is a flow from a client to dst answered by replySrc.
func udpFlow(dst, replySrc string) udpflows.Flow {
	return udpflows.Flow{Protocol: policy.ProtocolUDP, OrigSrc: netip.MustParseAddrPort("192.168.0.99:40000"),
		OrigDst: netip.MustParseAddrPort(dst), ReplySrc: netip.MustParseAddrPort(replySrc),
		ReplyDst: netip.MustParseAddrPort("192.168.0.10:40000")}
}

// The flows of the conntrack tests: to dns's ClusterIP and NodePort,
// answered by each endpoint, and one straight to c.
var (
	flowA      = udpFlow("10.96.0.53:53", "10.244.1.1:5353")
	flowB      = udpFlow("10.96.0.53:53", "10.244.1.2:5353")
	flowC      = udpFlow("10.96.0.53:53", "10.244.1.3:5353")
	flowCNode  = udpFlow("192.168.0.10:30053", "10.244.1.3:5353")
	flowBNode  = udpFlow("192.168.0.10:30053", "10.244.1.2:5353")
	flowToPodC = udpFlow("10.244.1.3:5353", "10.244.1.3:5353")
	// flowToDNSByNone is answered by no endpoint dns ever had.
	flowToDNSByNone = udpFlow("10.96.0.53:53", "10.244.1.9:5353")
)

// conntrackProxier is a test proxier whose data plane reconciles a fake
// conntrack table holding the flows above, after a first sync of dns
// served by a, b and c.
func conntrackProxier(t *testing.T) (*testProxier, *udpflows.FakeTable) {
	tp := newTestProxier(t, nil)
	table := udpflows.NewFakeTable(flowA, flowB, flowC, flowCNode, flowBNode, flowToPodC)
	tp.dp.ct = table
	tp.self(node(testNode, "192.168.0.10", nil))
	tp.svc(dnsService())
	tp.slice(dnsSlice(readyEp("10.244.1.1"), readyEp("10.244.1.2"), readyEp("10.244.1.3")))
	tp.syncNow(false)
	return tp, table
}

func flowLines(flows ...udpflows.Flow) string {
	return udpflows.NewFakeTable(flows...).Dump()
}

// TestConntrackReconcileRules: what the loop has the data plane delete,
// and when.
func TestConntrackReconcileRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		step func(tp *testProxier, table *udpflows.FakeTable)
		// left is the table after the step; reconciles the calls the
		// step made; deleted the flows the Observer was told of.
		left       []udpflows.Flow
		reconciles int
		deleted    int
	}{
		{name: "an endpoint that stops serving loses its flows; a serving-terminating one keeps them",
			step: func(tp *testProxier, _ *udpflows.FakeTable) {
				tp.slice(dnsSlice(readyEp("10.244.1.1"), terminatingEp("10.244.1.2")))
				tp.syncNow(false)
			},
			left: []udpflows.Flow{flowA, flowB, flowBNode, flowToPodC}, reconciles: 1, deleted: 2},
		{name: "a sync that changes no UDP service's serving endpoints reads no conntrack table",
			step: func(tp *testProxier, _ *udpflows.FakeTable) {
				tp.svc(service("web", "10.96.0.10"))
				tp.slice(slice("web-1", "web", ep{"10.244.1.3", "node-b"}))
				tp.syncNow(false)
			},
			left: []udpflows.Flow{flowA, flowB, flowC, flowCNode, flowBNode, flowToPodC}},
		{name: "a reconcile that failed is tried again after the next sync",
			step: func(tp *testProxier, table *udpflows.FakeTable) {
				table.Fail(errBoom)
				tp.slice(dnsSlice(readyEp("10.244.1.1"), readyEp("10.244.1.2")))
				tp.syncNow(false)
				table.Fail(nil)
				tp.syncNow(true) // periodic, nothing changed
			},
			left: []udpflows.Flow{flowA, flowB, flowBNode, flowToPodC}, reconciles: 2, deleted: 2},
		{name: "a service that no longer has a UDP port leaves no rules: another UDP change keeps its flows",
			step: func(tp *testProxier, table *udpflows.FakeTable) {
				table.Add(flowToDNSByNone)
				tp.svc(service("dns", "10.96.0.53")) // its port is http 80/TCP now
				tp.svc(service("dns2", "10.96.0.54", func(s *corev1.Service) {
					s.Spec.Ports = []corev1.ServicePort{{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53}}
				}))
				s := dnsSlice(readyEp("10.244.1.1"))
				s.Name, s.Labels[apiconv.LabelServiceName] = "dns2-1", "dns2"
				tp.slice(s)
				tp.syncNow(false)
			},
			left: []udpflows.Flow{flowA, flowB, flowC, flowCNode, flowBNode, flowToPodC, flowToDNSByNone}, reconciles: 1},
		{name: "a service a full sync no longer has leaves no rules: another UDP change keeps its flows",
			step: func(tp *testProxier, table *udpflows.FakeTable) {
				table.Add(flowToDNSByNone)
				tp.delSvc("dns")
				tp.syncNow(true) // periodic: a full sync here
				tp.svc(service("dns2", "10.96.0.54", func(s *corev1.Service) {
					s.Spec.Ports = []corev1.ServicePort{{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53}}
				}))
				s := dnsSlice(readyEp("10.244.1.1"))
				s.Name, s.Labels[apiconv.LabelServiceName] = "dns2-1", "dns2"
				tp.slice(s)
				tp.syncNow(false)
			},
			left: []udpflows.Flow{flowA, flowB, flowC, flowCNode, flowBNode, flowToPodC, flowToDNSByNone}, reconciles: 2},
		{name: "a deleted service's flows are left to the kernel, as kube-proxy leaves them",
			step: func(tp *testProxier, _ *udpflows.FakeTable) {
				tp.delSvc("dns")
				tp.syncNow(false)
			},
			left: []udpflows.Flow{flowA, flowB, flowC, flowCNode, flowBNode, flowToPodC}, reconciles: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp, table := conntrackProxier(t)
			if d := table.Dump(); d != flowLines(flowA, flowB, flowC, flowCNode, flowBNode, flowToPodC) {
				t.Fatalf("the first sync deleted flows of serving endpoints; left:\n%s", d)
			}
			calls, deleted := tp.dp.ctCalls, tp.seams.ctDeleted[corev1.IPv4Protocol]
			tc.step(tp, table)
			if got, want := table.Dump(), flowLines(tc.left...); got != want {
				t.Errorf("flows left:\n%swant:\n%s", got, want)
			}
			if got := tp.dp.ctCalls - calls; got != tc.reconciles {
				t.Errorf("%d reconciles, want %d", got, tc.reconciles)
			}
			if got := tp.seams.ctDeleted[corev1.IPv4Protocol] - deleted; got != tc.deleted {
				t.Errorf("Observer told of %d deleted flows, want %d", got, tc.deleted)
			}
		})
	}
}
