package dashboard

import (
	"slices"
	"testing"
)

// TestMissing: a metric is there with labels or without; the absent ones
// are named; up is never missing.
func TestMissing(t *testing.T) {
	body := "# HELP go_goroutines x\ngo_goroutines 7\nrest_client_requests_total{code=\"200\"} 3\n"
	got := Missing(body)
	for _, name := range []string{"go_goroutines", "rest_client_requests_total", "up"} {
		if slices.Contains(got, name) {
			t.Errorf("Missing says %s is missing", name)
		}
	}
	if !slices.Contains(got, "kubeproxy_sync_proxy_rules_duration_seconds_bucket") || len(got) != len(Metrics())-3 {
		t.Errorf("Missing = %v", got)
	}
}
