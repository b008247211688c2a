package app

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestProfiling: --profiling and enableProfiling serve Go's profiles on
// the metrics server, as kube-proxy; without them /debug/pprof/ is absent.
func TestProfiling(t *testing.T) {
	dir := t.TempDir()
	on := writeFile(t, dir, "on.yaml", typeMeta+"enableProfiling: true\n")
	tests := []struct {
		name string
		args []string
		want bool
	}{
		{"off by default", nil, false},
		{"--profiling", []string{"--profiling"}, true},
		{"--profiling=false", []string{"--profiling=false"}, false},
		{"enableProfiling in the file", []string{"--config", on}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, _ := mustParse(t, append(tc.args, "--hostname-override", "n")...)
			rc := o.RunConfig()
			if rc.EnableProfiling != tc.want {
				t.Fatalf("EnableProfiling = %v, want %v", rc.EnableProfiling, tc.want)
			}
			h := metricsHandler(prometheus.NewRegistry(), rc.EnableProfiling)
			for path, code := range map[string]int{"/debug/pprof/heap": http.StatusOK, "/debug/pprof/": http.StatusOK, "/metrics": http.StatusOK} {
				if !tc.want && path != "/metrics" {
					code = http.StatusNotFound
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
				if rec.Code != code {
					t.Errorf("GET %s: %d, want %d", path, rec.Code, code)
				}
			}
		})
	}
}
