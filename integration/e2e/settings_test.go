//go:build !integration

package e2e

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/apiserver"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// TestHealthCheckNodePortListensOnlyOnNodePortAddresses: with
// --nodeport-addresses, an eTP=Local Service's healthCheckNodePort
// answers on the host's addresses in those CIDRs and on no other, as
// kube-proxy's.
func TestHealthCheckNodePortListensOnlyOnNodePortAddresses(t *testing.T) {
	outside := hostAddrsOutside(t, netip.MustParsePrefix("127.0.0.0/8"))
	if len(outside) == 0 {
		t.Skip("the host has no address outside 127.0.0.0/8 to check")
	}
	c := apiserver.Start(t, apiserver.Options{})
	admin := kubernetes.NewForConfigOrDie(c.AdminConfig())
	hcPort := healthCheckService(t, admin, "lb", "10.96.0.70")
	startProxy(t, c, "--ipvs-min-sync-period", "0s", "--nodeport-addresses", "127.0.0.0/8")

	inside := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(hcPort)))
	waitFor(t, "the health check node port to answer 200 on "+inside, func() bool { return healthCheck(inside) == 200 })
	for _, a := range outside {
		addr := net.JoinHostPort(a.String(), strconv.Itoa(int(hcPort)))
		if code := healthCheck(addr); code != 0 {
			t.Errorf("the health check answers %d on %s, outside --nodeport-addresses", code, addr)
		} else {
			t.Logf("%s: no answer (outside --nodeport-addresses)", addr)
		}
	}
}

// healthCheckService creates an eTP=Local LoadBalancer Service with one
// ready endpoint on this node and returns its healthCheckNodePort.
func healthCheckService(t *testing.T, admin kubernetes.Interface, name, clusterIP string) int32 {
	t.Helper()
	ctx := context.Background()
	if _, err := admin.CoreV1().Nodes().Create(ctx, node(nodeName, "zone-a", "192.0.2.1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hcPort := int32(32556)
	svc := tcpService("default", name, clusterIP, 80, func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = hcPort
	})
	if _, err := admin.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-1", Namespace: "default",
			Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{discoveryEndpointPort("p", 8080)},
		Endpoints:   []discoveryv1.Endpoint{readyEndpoint("10.244.1.7", nodeName)},
	}
	if _, err := admin.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return hcPort
}

// healthCheck is the status code a GET on addr answers, 0 for no answer.
func healthCheck(addr string) int {
	cl := http.Client{Timeout: time.Second}
	resp, err := cl.Get("http://" + addr + "/")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// hostAddrsOutside are the host's global unicast addresses outside p.
func hostAddrsOutside(t *testing.T, p netip.Prefix) []netip.Addr {
	t.Helper()
	ifAddrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []netip.Addr
	for _, ia := range ifAddrs {
		n, ok := ia.(*net.IPNet)
		if !ok {
			continue
		}
		a, ok := netip.AddrFromSlice(n.IP)
		if a = a.Unmap(); ok && a.IsGlobalUnicast() && !p.Contains(a) {
			out = append(out, a)
		}
	}
	return out
}

// TestAHealthzPortHeldAtStartIsServedOnceFreed: with bindAddressHardFail
// false (the default), a healthz port still held at startup (by a
// terminating kube-proxy, during a swap) is a Warning Event on the Node,
// the proxy runs on, and /healthz is served within kube-proxy's 5 s retry
// period once the port is free.
func TestAHealthzPortHeldAtStartIsServedOnceFreed(t *testing.T) {
	c, admin := startWithWeb(t)
	holder, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	healthzAddr := holder.Addr().String()
	dp := startProxy(t, c, "--ipvs-min-sync-period", "0s", "--healthz-bind-address", healthzAddr)
	waitEvent(t, admin, "default", nodeName, "FailedToStartProxierHealthcheck", "address already in use")
	waitFor(t, "the first sync", func() bool { return len(dp.snapshot()) > 0 })

	holder.Close()
	freed := time.Now()
	waitFor(t, "/healthz on "+healthzAddr, func() bool { code, _ := getQuietPath(healthzAddr, "/healthz"); return code != 0 })
	took := time.Since(freed)
	t.Logf("/healthz answered %v after the port was freed", took.Round(time.Millisecond))
	if took > 7*time.Second {
		t.Errorf("/healthz answered %v after the port was freed, want within about 5 s", took)
	}
}

// TestOOMScoreAdjIsApplied: --oom-score-adj (oomScoreAdj, -999 by
// default) is written to the proxy's /proc/self/oom_score_adj at
// startup, as kube-proxy; the proxy here is this test process. The value
// raises the score, which needs no privilege (lowering it needs
// CAP_SYS_RESOURCE, which the DaemonSet has and a test host may not).
func TestOOMScoreAdjIsApplied(t *testing.T) {
	c, _ := startWithWeb(t)
	startProxy(t, c, "--oom-score-adj", "501")
	var got string
	waitFor(t, "oom_score_adj 501", func() bool {
		b, err := os.ReadFile("/proc/self/oom_score_adj")
		got = strings.TrimSpace(string(b))
		return err == nil && got == "501"
	})
	t.Logf("/proc/self/oom_score_adj: %s", got)
}

// TestAllowServiceExternalIPsFalseServesNoExternalIP: with the feature
// gate AllowServiceExternalIPs=false, as in kube-proxy, a Service's
// spec.externalIPs get no virtual server; its ClusterIP does.
func TestAllowServiceExternalIPsFalseServesNoExternalIP(t *testing.T) {
	for _, tc := range []struct {
		name  string
		gates string
		want  bool
	}{
		{name: "served by default", gates: "AllowServiceExternalIPs=true", want: true},
		{name: "not served with the gate off", gates: "AllowServiceExternalIPs=false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, admin := startWithWeb(t)
			svc := tcpService("default", "ext", "10.96.0.81", 80, func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"203.0.113.81"} })
			if _, err := admin.CoreV1().Services("default").Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			dp := startProxy(t, c, "--ipvs-min-sync-period", "0s", "--feature-gates", tc.gates)
			waitFor(t, "default/ext's ClusterIP", func() bool { return dp.programmed()["10.96.0.81:80/TCP"] == "default/ext" })
			if want := tc.want; want {
				waitFor(t, "default/ext's external IP", func() bool { return dp.programmed()["203.0.113.81:80/TCP"] == "default/ext" })
			} else if got, ok := dp.programmed()["203.0.113.81:80/TCP"]; ok {
				t.Errorf("203.0.113.81:80/TCP is programmed for %s with %s", got, tc.gates)
			}
		})
	}
}

// TestBindAddressIsThePrimaryIP: a specified --bind-address (bindAddress)
// is the node's primary IP of its family in place of the Node's
// InternalIP, as kube-proxy's: with --nodeport-addresses primary the
// NodePort is served on it.
func TestBindAddressIsThePrimaryIP(t *testing.T) {
	c, admin := startWithWeb(t) // the Node's InternalIP is 192.0.2.1
	svc := tcpService("default", "np", "10.96.0.82", 80, func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.Ports[0].NodePort = 30082
	})
	if _, err := admin.CoreV1().Services("default").Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dp := startProxy(t, c, "--ipvs-min-sync-period", "0s", "--nodeport-addresses", "primary", "--bind-address", "192.0.2.99")
	waitFor(t, "default/np's ClusterIP", func() bool { return dp.programmed()["10.96.0.82:80/TCP"] == "default/np" })
	got := dp.programmed()
	if got["192.0.2.99:30082/TCP"] != "default/np" {
		t.Errorf("the NodePort is not served on --bind-address 192.0.2.99: %v", got)
	}
	if s, ok := got["192.0.2.1:30082/TCP"]; ok {
		t.Errorf("the NodePort is served on the Node's InternalIP 192.0.2.1 (for %s), not only on --bind-address", s)
	}
}

// TestNodeCIDRModeWaitsForThePodCIDRs: with --detect-local-mode NodeCIDR
// the proxy waits until its Node has podCIDRs, as kube-proxy, and then
// treats them as the pod network: ClusterIP traffic from outside them is
// masqueraded (without --cluster-cidr, ClusterCIDR mode masquerades
// none). The marker of the wait is its log line, written once the proxy
// has read its Node without podCIDRs; the proof that nothing was synced
// before them is the first data plane call of all: a full sync of a plan
// made with them.
func TestNodeCIDRModeWaitsForThePodCIDRs(t *testing.T) {
	c, admin := startWithWeb(t) // node-a has no podCIDRs yet
	log := &lockedBuffer{}
	dp := runProxyLogging(t, c, proxyToken(t, c), log, "--ipvs-min-sync-period", "0s", "--cluster-cidr=", "--detect-local-mode", "NodeCIDR")
	waitFor(t, "the proxy waiting for its Node's podCIDRs", func() bool {
		return strings.Contains(log.String(), "Waiting for the node's podCIDRs")
	})
	if calls := dp.snapshot(); len(calls) != 0 {
		t.Fatalf("%d data plane calls before the Node has podCIDRs, want none", len(calls))
	}
	ctx := context.Background()
	n, err := admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.7.0/24", []string{"10.244.7.0/24"}
	if _, err := admin.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first data plane call", func() bool { return len(dp.snapshot()) > 0 })
	first := dp.snapshot()[0]
	if !first.full {
		t.Fatalf("the first data plane call is an Apply of %d services, want the first full sync", len(first.changes))
	}
	masq, found := policy.Masquerade(""), false
	for _, vs := range first.plan.VirtualServers {
		if vs.Service.String() == "default/web" && vs.Kind == policy.KindClusterIP {
			masq, found = vs.Masquerade, true
		}
	}
	if !found {
		t.Fatalf("the first full sync has no ClusterIP of default/web: %+v", first.plan.VirtualServers)
	}
	if masq != policy.MasqueradeOffCluster {
		t.Errorf("default/web's ClusterIP: masquerade %s, want %s (from outside the node's podCIDRs)", masq, policy.MasqueradeOffCluster)
	}
}
