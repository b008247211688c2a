//go:build !integration

package e2e

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/apiserver"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// TestAddressWarningsThroughTheAPI: what the API server accepts and no
// Service may take, or a Service lists twice, is planned once or not at
// all, and the proxy says so in an Event on the Service: an external IP
// listed twice (one virtual server, a DuplicateAddress Event), a
// load-balancer status IP of 127.0.0.1 (the API checks its form only: no
// virtual server, a RefusedAddress Event), and an endpoint on a
// multicast address (the API refuses link-local multicast only: left
// out, a RefusedAddress Event naming the slice).
func TestAddressWarningsThroughTheAPI(t *testing.T) {
	c := apiserver.Start(t, apiserver.Options{})
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(c.AdminConfig())
	createNode(t, admin, nodeName, "zone-a", "192.0.2.1")
	svcs := admin.CoreV1().Services("default")
	dup := tcpService("default", "dup", "10.96.0.80", 80, func(s *corev1.Service) {
		s.Spec.ExternalIPs = []string{"203.0.113.60", "203.0.113.60"}
	})
	if _, err := svcs.Create(ctx, dup, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create dup: %v", err)
	}
	slice := webSlice()
	slice.Name, slice.Labels = "dup-1", map[string]string{"kubernetes.io/service-name": "dup"}
	slice.Ports = []discoveryv1.EndpointPort{discoveryEndpointPort("p", 8080)}
	slice.Endpoints = append(slice.Endpoints, readyEndpoint("10.244.1.9", nodeName), readyEndpoint("239.1.1.1", nodeName))
	if _, err := admin.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create dup's slice: %v", err)
	}
	lb := tcpService("default", "lb-loop", "10.96.0.81", 80, func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer })
	lb, err := svcs.Create(ctx, lb, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create lb-loop: %v", err)
	}
	vip := corev1.LoadBalancerIPModeVIP
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "127.0.0.1", IPMode: &vip}, {IP: "198.51.100.77", IPMode: &vip}}
	if _, err := svcs.UpdateStatus(ctx, lb, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("write lb-loop's status (127.0.0.1, 198.51.100.77): %v", err)
	}

	dp := startProxy(t, c, "--ipvs-min-sync-period", "0s")
	waitFor(t, "lb-loop's load-balancer IP", func() bool { return dp.programmed()["198.51.100.77:80/TCP"] == "default/lb-loop" })
	waitFor(t, "dup's external IP", func() bool { return dp.programmed()["203.0.113.60:80/TCP"] == "default/dup" })

	t.Run("an external IP listed twice is one virtual server, with an Event", func(t *testing.T) {
		n := 0
		for _, call := range dp.snapshot() {
			for _, vs := range call.plan.VirtualServers {
				if vs.Key().String() == "203.0.113.60:80/TCP" {
					n++
				}
			}
			for _, sp := range call.changes {
				for _, vs := range sp.VirtualServers {
					if vs.Key().String() == "203.0.113.60:80/TCP" {
						n++
					}
				}
			}
			if n > 1 {
				t.Fatalf("203.0.113.60:80/TCP planned %d times in one sync", n)
			}
			n = 0
		}
		waitEvent(t, admin, "default", "dup", policy.ReasonDuplicateAddress, "spec.externalIPs[1]: 203.0.113.60 is also spec.externalIPs[0]")
	})
	t.Run("a load-balancer status IP of 127.0.0.1 gets no virtual server, and an Event", func(t *testing.T) {
		if got, ok := dp.programmed()["127.0.0.1:80/TCP"]; ok {
			t.Errorf("127.0.0.1:80/TCP is programmed for %s", got)
		}
		waitEvent(t, admin, "default", "lb-loop", policy.ReasonRefusedAddress,
			"status.loadBalancer.ingress[0].ip: 127.0.0.1 is a loopback address, which no Service may take; not served")
	})
	t.Run("an endpoint on a multicast address is left out, with an Event naming the slice", func(t *testing.T) {
		vs := dp.programmedVS()["10.96.0.80:80/TCP"]
		if len(vs.Destinations) != 1 || vs.Destinations[0].Address.String() != "10.244.1.9" {
			t.Errorf("dup's ClusterIP destinations %+v, want 10.244.1.9 only", vs.Destinations)
		}
		waitEvent(t, admin, "default", "dup", policy.ReasonRefusedAddress,
			"EndpointSlice default/dup-1: endpoints[1].addresses[0]: 239.1.1.1 is a multicast address")
	})
}
