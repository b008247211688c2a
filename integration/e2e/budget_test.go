//go:build !integration

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/apiserver"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// hugeService is a Service an editor may create: ports × external IPs.
func hugeService(ns, name string, ports, ips int) *corev1.Service {
	s := tcpService(ns, name, "", 1000)
	s.Spec.Ports = nil
	for i := range ports {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("p%d", i), Protocol: corev1.ProtocolTCP, Port: int32(1000 + i)})
	}
	for i := range ips {
		s.Spec.ExternalIPs = append(s.Spec.ExternalIPs, fmt.Sprintf("198.18.%d.%d", i>>8, i&0xff))
	}
	return s
}

// heapInUse is the Go heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestBudgetThroughTheAPI: Services of 50 ports × 1,000 external IPs and
// 1,000 ports × 10,000 external IPs, which the apiserver accepts from an
// editor, are not served (a TooManyVirtualServers Event each, with the
// count and the limit), the proxy's heap grows by less than 20 MiB, and
// another team's Service created next is programmed within a second.
func TestBudgetThroughTheAPI(t *testing.T) {
	c := apiserver.Start(t, apiserver.Options{})
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(c.AdminConfig())
	for _, ns := range []string{"tenant", "team-b"} {
		_, _ = admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	}
	createNode(t, admin, nodeName, "zone-a", "192.0.2.1")
	dp := startProxy(t, c, "--ipvs-min-sync-period", "0s")
	waitFor(t, "the first sync", func() bool { return len(dp.snapshot()) > 0 })
	before := heapInUse()

	for _, h := range []struct {
		name       string
		ports, ips int
		count      string
	}{{"wide", 50, 1000, "make 50050 virtual servers"}, {"huge", 1000, 10000, "make 10001000 virtual servers"}} {
		if _, err := admin.CoreV1().Services("tenant").Create(ctx, hugeService("tenant", h.name, h.ports, h.ips), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s (%d ports × %d external IPs): %v", h.name, h.ports, h.ips, err)
		}
		waitEvent(t, admin, "tenant", h.name, policy.ReasonTooManyVirtualServers, h.count+", over the limit of 10000")
	}
	for k, s := range dp.programmed() {
		if s == "tenant/wide" || s == "tenant/huge" {
			t.Errorf("%s is programmed for %s, a Service over the budget", k, s)
		}
	}
	after := heapInUse()
	t.Logf("heap in use: %.1f MiB before the two Services, %.1f MiB after", float64(before)/(1<<20), float64(after)/(1<<20))
	if after > before+20<<20 {
		t.Errorf("heap in use grew by %.1f MiB, want under 20", float64(after-before)/(1<<20))
	}

	start := time.Now()
	if _, err := admin.CoreV1().Services("team-b").Create(ctx, tcpService("team-b", "web", "10.96.0.80", 80), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "team-b/web", func() bool { return dp.programmed()["10.96.0.80:80/TCP"] == "team-b/web" })
	took := time.Since(start)
	t.Logf("team-b/web programmed %v after its creation", took)
	if took > time.Second {
		t.Errorf("team-b/web programmed after %v, want under 1s", took)
	}
}

// TestBudgetFromTheConfigFile: the budget set by the --config file's
// KubeIPVSProxyConfiguration document, the only place a kubeadm
// DaemonSet running our image can set it, is the one applied: a Service
// of five ports is refused under a limit of four, one of three ports is
// served.
func TestBudgetFromTheConfigFile(t *testing.T) {
	c := apiserver.Start(t, apiserver.Options{})
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(c.AdminConfig())
	_, _ = admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}, metav1.CreateOptions{})
	createNode(t, admin, nodeName, "zone-a", "192.0.2.1")
	config := filepath.Join(t.TempDir(), "config.conf")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: ipvs
clusterCIDR: 10.244.0.0/16
clientConnection:
  kubeconfig: %s
healthzBindAddress: %s
metricsBindAddress: %s
ipvs:
  syncPeriod: 1h
---
apiVersion: kube-ipvs-proxy.io/v1alpha1
kind: KubeIPVSProxyConfiguration
maxVirtualServersPerService: 4
`, c.KubeconfigForToken(proxyToken(t, c)), freeAddr(t), freeAddr(t))), 0o600); err != nil {
		t.Fatal(err)
	}
	dp := startProxy(t, c, "--config", config)
	waitFor(t, "the first sync", func() bool { return len(dp.snapshot()) > 0 })

	for _, s := range []*corev1.Service{hugeService("tenant", "five", 5, 0), hugeService("tenant", "three", 3, 0)} {
		s.Spec.ClusterIP = ""
		if _, err := admin.CoreV1().Services("tenant").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitEvent(t, admin, "tenant", "five", policy.ReasonTooManyVirtualServers, "make 5 virtual servers, over the limit of 4")
	waitFor(t, "tenant/three's three ports", func() bool {
		n := 0
		for _, s := range dp.programmed() {
			if s == "tenant/three" {
				n++
			}
		}
		return n == 3
	})
	for k, s := range dp.programmed() {
		if s == "tenant/five" {
			t.Errorf("%s is programmed for tenant/five, a Service over the file's budget", k)
		}
	}
}
