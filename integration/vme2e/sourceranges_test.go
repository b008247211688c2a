//go:build integration

package vme2e

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/moby/ipvs"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
)

// lbIP is the load balancer's ingress address.
const lbIP = "198.51.100.10"

// checkSourceRangesHoldTheNode creates a LoadBalancer Service whose
// source ranges leave the node out, sees the node's own connection to it
// dropped once IPVS serves it, then adds the node's IP to the ranges and
// sees the connection reach the pod. The node's connection comes from
// the load balancer's address on kube-ipvs0 and reaches IPVS in
// LOCAL_OUT, never passing INPUT: kube-proxy's IPVS mode drops it unless
// a range holds the node's IP.
func checkSourceRangesHoldTheNode(t *testing.T, ctx context.Context, admin kubernetes.Interface, pod *labnet.Pod) {
	t.Helper()
	svcs := admin.CoreV1().Services("default")
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "lb", Namespace: "default"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerSourceRanges: []string{"203.0.113.0/24"},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(podPort)}}}}
	svc, err := svcs.Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: lbIP}}
	if svc, err = svcs.UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	slice := webSlice(pod)
	slice.Name, slice.Labels[discoveryv1.LabelServiceName] = "lb-1", "lb"
	if _, err := admin.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	addr := lbIP + ":80"

	waitForVirtualServer(t, lbIP, 80)
	waitForDrop(t, addr)
	t.Logf("%s: the node's connection is dropped while the ranges %v leave out its IP", addr, svc.Spec.LoadBalancerSourceRanges)

	node := strings.Split(guestAddr, "/")[0]
	svc.Spec.LoadBalancerSourceRanges = append(svc.Spec.LoadBalancerSourceRanges, node+"/32")
	if _, err := svcs.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForBackends(t, addr, pod.Name)
	t.Logf("%s: the node's connection passes once the ranges hold its IP %s", addr, node)
}

// waitForVirtualServer waits until IPVS has the TCP virtual server, so
// that the address is bound on kube-ipvs0 and a connection to it cannot
// leave through eth0.
func waitForVirtualServer(t *testing.T, ip string, port uint16) {
	t.Helper()
	h, err := ipvs.New("")
	if err != nil {
		t.Fatalf("ipvs handle: %v", err)
	}
	defer h.Close()
	vs := &ipvs.Service{Address: net.ParseIP(ip), Port: port, Protocol: unix.IPPROTO_TCP, AddressFamily: unix.AF_INET}
	for deadline := time.Now().Add(waitLimit); ; time.Sleep(200 * time.Millisecond) {
		if _, err := h.GetService(vs); err == nil {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("IPVS virtual server %s:%d not there after %v: %v", ip, port, waitLimit, err)
		}
	}
}

// waitForDrop waits until a connection to addr times out, then checks
// that two more do. A sync writes nftables before IPVS, so the first
// attempt should already time out; the wait is a guard.
func waitForDrop(t *testing.T, addr string) {
	t.Helper()
	attempt := func() error {
		_, _, err := labnet.Exchange(nil, labnet.TCP, addr, time.Second)
		if err == nil {
			return errors.New("answered")
		}
		if !labnet.IsTimeout(err) {
			return err
		}
		return nil
	}
	deadline := time.Now().Add(waitLimit)
	for err := attempt(); err != nil; err = attempt() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: a connection from the node still %v after %v, want it dropped (a timeout)", addr, err, waitLimit)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for range 2 {
		if err := attempt(); err != nil {
			t.Fatalf("%s: a connection from the node %v after one timed out, want it dropped", addr, err)
		}
	}
}
