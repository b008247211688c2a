//go:build !integration

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/dashboard"
)

// TestDashboardMetrics: every metric the kubernetes-mixin kube-proxy
// dashboard queries is on a live proxy's /metrics, against a real
// kube-apiserver, with kube-proxy's labels where the dashboard filters on
// them (rest_client_requests_total's code); /configz and /metrics/slis
// answer as kube-proxy's do.
func TestDashboardMetrics(t *testing.T) {
	c, admin := startWithWeb(t)
	metricsAddr := freeAddr(t)
	dp := startProxy(t, c, "--metrics-bind-address", metricsAddr)
	waitFor(t, "the first sync", func() bool { return len(dp.snapshot()) > 0 })
	// An endpoint change after the start, for the programming latency.
	slice := webSlice(endpoint{"10.244.1.5", nodeName, "zone-a"})
	slice.Annotations = map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": time.Now().UTC().Format(time.RFC3339Nano)}
	if _, err := admin.DiscoveryV1().EndpointSlices("default").Create(context.Background(), slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var body string
	waitFor(t, "/metrics with the programming latency", func() bool {
		code, b := getQuietPath(metricsAddr, "/metrics")
		body = b
		return code == 200 && strings.Contains(b, "kubeproxy_network_programming_duration_seconds_count")
	})
	for _, name := range dashboard.Missing(body) {
		t.Errorf("/metrics lacks %s, which the kube-proxy dashboard queries", name)
	}
	if !strings.Contains(body, `rest_client_requests_total{code="200"`) {
		t.Errorf("rest_client_requests_total has no code=\"200\" series:\n%s", grepLines(body, "rest_client_requests_total"))
	}
	for _, path := range []string{"/configz", "/metrics/slis"} {
		if code, b := getQuietPath(metricsAddr, path); code != 200 {
			t.Errorf("GET %s: %d %s", path, code, b)
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
