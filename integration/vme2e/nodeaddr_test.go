//go:build integration

package vme2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
)

const (
	// otherNodeIP is the InternalIP of another Node, node-1.
	otherNodeIP = "10.0.2.20"
	// plainExternalIP is an external IP that is no node's: bound.
	plainExternalIP = "203.0.113.50"
	nodeAddrPort    = 8081
)

// checkOtherNodesAddressIsNotBound creates another Node, node-1, and a
// Service whose external IPs are node-1's InternalIP and an address that
// is no node's. The proxy, running as this node, serves both, binds the
// second on kube-ipvs0 and never the first: bound here, node-1's address
// would take the replies that node-1's masqueraded connections get.
func checkOtherNodesAddressIsNotBound(t *testing.T, ctx context.Context, admin kubernetes.Interface, pod *labnet.Pod) {
	t.Helper()
	n, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: otherNodeIP}}
	if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "on-node-1", Namespace: "default"},
		Spec: corev1.ServiceSpec{ExternalIPs: []string{otherNodeIP, plainExternalIP}, Ports: []corev1.ServicePort{
			{Name: "http", Protocol: corev1.ProtocolTCP, Port: nodeAddrPort, TargetPort: intstr.FromInt32(podPort)}}}}
	if _, err := admin.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	slice := webSlice(pod)
	slice.Name, slice.Labels[discoveryv1.LabelServiceName] = "on-node-1-1", "on-node-1"
	if _, err := admin.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	waitForVirtualServer(t, otherNodeIP, nodeAddrPort)
	waitForVirtualServer(t, plainExternalIP, nodeAddrPort)
	deadline := time.Now().Add(waitLimit)
	for !slices.Contains(dummyAddresses(t), plainExternalIP) {
		if time.Now().After(deadline) {
			t.Fatalf("%s not bound on kube-ipvs0 after %v: %v", plainExternalIP, waitLimit, dummyAddresses(t))
		}
		time.Sleep(200 * time.Millisecond)
	}
	got := dummyAddresses(t)
	if slices.Contains(got, otherNodeIP) {
		t.Fatalf("kube-ipvs0 holds node-1's InternalIP %s: %v", otherNodeIP, got)
	}
	t.Logf("IPVS serves %s:%d and %s:%d; kube-ipvs0 holds %v: node-1's address is served unbound",
		otherNodeIP, nodeAddrPort, plainExternalIP, nodeAddrPort, got)
}

// dummyAddresses lists the IPv4 addresses bound on kube-ipvs0.
func dummyAddresses(t *testing.T) []string {
	t.Helper()
	link, err := netlink.LinkByName("kube-ipvs0")
	if err != nil {
		t.Fatalf("kube-ipvs0: %v", err)
	}
	addrs, err := netlink.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		t.Fatalf("kube-ipvs0's addresses: %v", err)
	}
	var out []string
	for _, a := range addrs {
		out = append(out, a.IP.String())
	}
	slices.Sort(out)
	return out
}
