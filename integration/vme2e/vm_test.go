//go:build integration

package vme2e

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/cmd/kube-ipvs-proxy/app"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/dashboard"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
)

const (
	clusterIP   = "10.96.0.10"
	podPort     = 8080
	podUDPPort  = 5353
	metricsAddr = "127.0.0.1:10249"
	healthzAddr = "127.0.0.1:10256"
	nExchanges  = 20
	waitLimit   = 90 * time.Second
)

// TestProxyInVM runs the proxy's real mode against the host's apiserver
// and follows a Service's traffic as its EndpointSlice changes.
func TestProxyInVM(t *testing.T) {
	proxyKC, adminKC := os.Getenv(EnvProxyKubeconfig), os.Getenv(EnvAdminKubeconfig)
	if proxyKC == "" || adminKC == "" {
		t.Skip("run by the host half: KIP_VME2E=1 go test ./integration/vme2e/")
	}
	if err := BringUpNetwork(); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", adminKC)
	if err != nil {
		t.Fatal(err)
	}
	admin := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	if _, err := admin.Discovery().ServerVersion(); err != nil {
		t.Fatalf("the apiserver from the VM (%s): %v", cfg.Host, err)
	}

	pods := map[string]*labnet.Pod{"pod-1": labnet.NewPod(t, "pod-1", 1), "pod-2": labnet.NewPod(t, "pod-2", 2)}
	for name, p := range pods {
		labnet.Echo{Name: name}.Serve(t, p.Host, podPort, podUDPPort)
	}
	createObjects(t, ctx, admin, pods)

	start := time.Now()
	stop := startProxy(t, proxyKC)
	addr := fmt.Sprintf("%s:%d", clusterIP, 80)
	waitForBackends(t, addr, "pod-1", "pod-2")
	t.Logf("traffic to %s reached both pods %v after the proxy started", addr, time.Since(start).Round(time.Millisecond))

	t.Run("traffic follows an EndpointSlice update", func(t *testing.T) {
		sliceClient := admin.DiscoveryV1().EndpointSlices("default")
		cur, err := sliceClient.Get(ctx, "web-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		next := webSlice(pods["pod-1"])
		next.ResourceVersion = cur.ResourceVersion
		updated := time.Now()
		// As the EndpointSlice controller does: the programming latency
		// (which the kube-proxy dashboard plots) counts from it.
		next.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: updated.UTC().Format(time.RFC3339Nano)}
		if _, err := sliceClient.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitForBackends(t, addr, "pod-1")
		t.Logf("traffic only reaches pod-1 %v after the update", time.Since(updated).Round(time.Millisecond))
	})

	t.Run("the node's own connections to a load balancer are held to its source ranges", func(t *testing.T) {
		checkSourceRangesHoldTheNode(t, ctx, admin, pods["pod-1"])
	})

	t.Run("another Node's address as an external IP is served unbound, never bound on kube-ipvs0", func(t *testing.T) {
		checkOtherNodesAddressIsNotBound(t, ctx, admin, pods["pod-1"])
	})

	t.Run("oomScoreAdj's default -999 is applied, as kube-proxy", func(t *testing.T) {
		b, err := os.ReadFile("/proc/self/oom_score_adj")
		if got := strings.TrimSpace(string(b)); err != nil || got != "-999" {
			t.Errorf("/proc/self/oom_score_adj %q (%v), want -999", got, err)
		} else {
			t.Logf("/proc/self/oom_score_adj: %s", got)
		}
	})

	t.Run("healthz and metrics answer", func(t *testing.T) {
		if code, body := get(t, "http://"+healthzAddr+"/healthz"); code != http.StatusOK {
			t.Errorf("/healthz: %d %s", code, body)
		} else {
			t.Logf("/healthz: %d %s", code, strings.TrimSpace(body))
		}
		code, body := get(t, "http://"+metricsAddr+"/metrics")
		if code != http.StatusOK || !strings.Contains(body, "kubeproxy_sync_proxy_rules_duration_seconds") {
			t.Fatalf("/metrics: %d, lacks kubeproxy_sync_proxy_rules_duration_seconds", code)
		}
		for _, l := range strings.Split(body, "\n") {
			if strings.HasPrefix(l, "kubeproxy_sync_proxy_rules_duration_seconds_count") || strings.HasPrefix(l, "kube_ipvs_proxy_virtual_servers") {
				t.Logf("/metrics: %s", l)
			}
		}
		// The kubernetes-mixin kube-proxy dashboard's metrics.
		for _, name := range dashboard.Missing(body) {
			t.Errorf("/metrics lacks %s, which the kube-proxy dashboard queries", name)
		}
		for _, path := range []string{"/configz", "/metrics/slis"} {
			if code, b := get(t, "http://"+metricsAddr+path); code != http.StatusOK {
				t.Errorf("GET %s: %d %s", path, code, b)
			}
		}
	})

	stop()
	t.Run("a rollback's one-shot that finds no kube-proxy rules keeps our table, exits 0 and records a Node Event", func(t *testing.T) {
		checkHandbackWithoutKubeProxy(t, ctx, admin, proxyKC)
	})
	if code := app.Run(ctx, MustParse(t, "--cleanup"), io.Discard, os.Stderr); code != app.ExitOK {
		t.Fatalf("--cleanup exited %d", code)
	}
	checkNothingLeft(t)
}

// createObjects creates this node, the web Service and its EndpointSlice
// with both pods, the way the kubelet and the controllers would.
func createObjects(t *testing.T, ctx context.Context, admin kubernetes.Interface, pods map[string]*labnet.Pod) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{"kubernetes.io/hostname": nodeName}}}
	n, err := admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: strings.Split(guestAddr, "/")[0]}}
	if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.ServiceSpec{ClusterIP: clusterIP, Ports: []corev1.ServicePort{
			{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(podPort)}}}}
	if _, err := admin.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.DiscoveryV1().EndpointSlices("default").Create(ctx, webSlice(pods["pod-1"], pods["pod-2"]), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// webSlice is the web Service's EndpointSlice with the pods, ready, on
// this node.
func webSlice(pods ...*labnet.Pod) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default",
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(podPort))}},
	}
	for _, p := range pods {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{p.IP.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}, NodeName: ptr(nodeName)})
	}
	return s
}

func ptr[T any](v T) *T { return &v }

// startProxy runs the real mode with the DaemonSet's flags.
func startProxy(t *testing.T, kubeconfig string) (stop func()) {
	t.Helper()
	return StartProxy(t, os.Stdout, "--kubeconfig", kubeconfig, "--hostname-override", nodeName,
		"--cluster-cidr", "10.244.0.0/16", "--ipvs-min-sync-period", "0s",
		"--metrics-bind-address", metricsAddr, "--healthz-bind-address", healthzAddr)
}

// waitForBackends repeats rounds of fresh TCP exchanges to addr until one
// round is answered by exactly the wanted pods.
func waitForBackends(t *testing.T, addr string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	var last map[string]int
	var lastErr error
	for time.Now().Before(deadline) {
		last, lastErr = map[string]int{}, nil
		for range nExchanges {
			name, _, err := labnet.Exchange(nil, labnet.TCP, addr, time.Second)
			if err != nil {
				lastErr = err
				break
			}
			last[name]++
		}
		if lastErr == nil && slices.Equal(slices.Sorted(maps.Keys(last)), want) {
			t.Logf("%s: %d exchanges answered by %v", addr, nExchanges, last)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: after %v answered by %v (last error %v), want exactly %v", addr, waitLimit, last, lastErr, want)
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// checkNothingLeft fails unless --cleanup removed every IPVS virtual
// server and kube-ipvs0.
func checkNothingLeft(t *testing.T) {
	t.Helper()
	h, err := ipvs.New("")
	if err != nil {
		t.Fatalf("ipvs handle: %v", err)
	}
	defer h.Close()
	if svcs, err := h.GetServices(); err != nil || len(svcs) != 0 {
		t.Errorf("after --cleanup: %d IPVS virtual servers left (err %v)", len(svcs), err)
	}
	if _, err := netlink.LinkByName("kube-ipvs0"); err == nil {
		t.Errorf("after --cleanup: kube-ipvs0 still exists")
	}
	t.Logf("after --cleanup: no IPVS virtual servers, no kube-ipvs0")
}
