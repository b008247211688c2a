//go:build integration

package traffic

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
)

// k8sUDPService is default/<name>: UDP port dns 53 on clusterIP, and
// NodePort nodePort when not 0.
func k8sUDPService(name, clusterIP string, nodePort int32) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP},
			Ports: []corev1.ServicePort{{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53}}}}
	if nodePort != 0 {
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.Ports[0].NodePort = nodePort
	}
	return s
}

// udpEndpoint is a pod of k8sUDPSlice and its conditions.
type udpEndpoint struct {
	pod                         string
	ready, serving, terminating bool
}

func readyPod(pod string) udpEndpoint       { return udpEndpoint{pod, true, true, false} }
func terminatingPod(pod string) udpEndpoint { return udpEndpoint{pod, false, true, true} }

// k8sUDPSlice is the IPv4 EndpointSlice of default/<svc>: port dns on
// the pods' UDP echo servers.
func (h *harness) k8sUDPSlice(svc string, eps ...udpEndpoint) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: svc + "-v4", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("dns"), Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(int32(podUDPPort))}},
	}
	for _, e := range eps {
		p := h.pod(e.pod)
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{p.v4.String()}, NodeName: ptr.To(p.node),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(e.ready), Serving: ptr.To(e.serving), Terminating: ptr.To(e.terminating)}})
	}
	return s
}

// TestStaleUDPFlowsDeletedAfterTheSync: the whole proxy, after a sync
// that changed a UDP Service's endpoints, deletes exactly the conntrack
// flows to that Service (its ClusterIP and its NodePort on the node's
// address) answered by the endpoint that no longer serves, and counts
// them in kubeproxy_conntrack_reconciler_deleted_entries_total. The
// serving-terminating endpoint's flows stay, and so do the flows the same
// removed pod answers for another Service, and the flows straight to it.
func TestStaleUDPFlowsDeletedAfterTheSync(t *testing.T) {
	h := newHarness(t)
	// Flows live 30 s without traffic; the test may take longer under
	// TCG.
	labnet.SetSysctl(t, nil, "net/netfilter/nf_conntrack_udp_timeout", "300")
	const (
		dnsIP, otherIP = "10.96.21.53", "10.96.21.54"
		nodePort       = 30153
	)
	l := newLoop(t, h, k8sNodeA(),
		k8sUDPService("ctdns", dnsIP, nodePort), h.k8sUDPSlice("ctdns", readyPod("pod-a1"), readyPod("pod-a2"), readyPod("pod-b1")),
		k8sUDPService("ctother", otherIP, 0), h.k8sUDPSlice("ctother", readyPod("pod-b1")))
	clusterIP, nodePortAddr, other := dnsIP+":53", fmt.Sprintf("%s:%d", h.root.v4, nodePort), otherIP+":53"
	if _, err := l.udpAnswered(h.client, other, "pod-b1", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	// Only the reconciler may delete flows here. With expire_nodest_conn
	// on, as the proxy sets it at its first sync, the kernel itself soon
	// expires the connections of a deleted IPVS destination with their
	// conntrack entries: also the serving-terminating endpoint's, to
	// which IPVS no longer sends once a ready one exists.
	labnet.SetSysctl(t, nil, "net/ipv4/vs/expire_nodest_conn", "0")

	for _, addr := range []string{clusterIP, nodePortAddr} {
		got, err := l.Count(h.client, addr, UDP, 9)
		h.must(err)
		if got["pod-a1"] == 0 || got["pod-a2"] == 0 || got["pod-b1"] == 0 {
			t.Fatalf("%s answered by %s, want every pod", addr, formatCounts(got))
		}
	}
	if _, err := l.Count(h.client, other, UDP, 2); err != nil {
		t.Fatal(err)
	}
	b1 := hostPort(h.pod("pod-b1").v4, podUDPPort)
	if name, _, err := l.UDP(h.pod("pod-a3"), b1); err != nil || name != "pod-b1" {
		t.Fatalf("straight to %s: %q, %v", b1, name, err)
	}
	a2 := hostPort(h.pod("pod-a2").v4, podUDPPort)
	before := labnet.CountUDPFlows(t, labnet.UDPFlow.String)
	stale := before[clusterIP+">"+b1] + before[nodePortAddr+">"+b1]
	t.Logf("flows before: %v", before)
	for _, k := range []string{clusterIP + ">" + b1, nodePortAddr + ">" + b1, clusterIP + ">" + a2, nodePortAddr + ">" + a2, other + ">" + b1, b1 + ">" + b1} {
		if before[k] == 0 {
			t.Fatalf("no flow %s before the change", k)
		}
	}
	const deletedMetric = "kubeproxy_conntrack_reconciler_deleted_entries_total"
	counted := l.metric(deletedMetric, "ip_family=IPv4")

	// pod-a2 starts terminating (still serving), pod-b1 leaves ctdns.
	_, err := l.client.DiscoveryV1().EndpointSlices("default").Update(context.Background(),
		h.k8sUDPSlice("ctdns", readyPod("pod-a1"), terminatingPod("pod-a2")), metav1.UpdateOptions{})
	h.must(err)
	deadline := time.Now().Add(20 * time.Second)
	for l.metric(deletedMetric, "ip_family=IPv4")-counted < float64(stale) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	after := labnet.CountUDPFlows(t, labnet.UDPFlow.String)
	t.Logf("flows after: %v", after)
	if got := l.metric(deletedMetric, "ip_family=IPv4") - counted; got != float64(stale) {
		t.Errorf("%s grew by %v, want %d (pod-b1's flows to ctdns)", deletedMetric, got, stale)
	}
	var wrong []string
	for k, n := range before {
		want := n
		if k == clusterIP+">"+b1 || k == nodePortAddr+">"+b1 {
			want = 0
		}
		if after[k] != want && (strings.HasPrefix(k, dnsIP+":") || strings.HasPrefix(k, nodePortAddr) || strings.HasPrefix(k, other) || k == b1+">"+b1) {
			wrong = append(wrong, fmt.Sprintf("%s: %d, want %d", k, after[k], want))
		}
	}
	if len(wrong) > 0 {
		t.Errorf("flows after the change:\n  %s\n(pod-a1's and serving-terminating pod-a2's stay; pod-b1's go from ctdns only)", strings.Join(wrong, "\n  "))
	}
}

// udpAnswered polls a UDP exchange from `from` to addr until want
// answers or within passes.
func (l *loop) udpAnswered(from *host, addr, want string, within time.Duration) (time.Duration, error) {
	start := time.Now()
	var last string
	var lastErr error
	for time.Since(start) < within {
		name, _, err := l.Exchange(from, UDP, addr, 300*time.Millisecond)
		if err == nil && name == want {
			return time.Since(start), nil
		}
		last, lastErr = name, err
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start), fmt.Errorf("%s from %s: not answered by %s within %v (last: %q, %v)", addr, from, want, within, last, lastErr)
}
