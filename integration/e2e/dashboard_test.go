//go:build !integration

package e2e

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// dashboardMetrics reads the fixture's metric names.
func dashboardMetrics(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "kube-proxy-dashboard-metrics.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			names = append(names, l)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

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
	has := func(name string) bool {
		return strings.Contains(body, "\n"+name+"{") || strings.Contains(body, "\n"+name+" ")
	}
	for _, name := range dashboardMetrics(t) {
		if name == "up" {
			continue // Prometheus's; /metrics answered
		}
		if !has(name) {
			t.Errorf("/metrics lacks %s, which the kube-proxy dashboard queries", name)
		}
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
