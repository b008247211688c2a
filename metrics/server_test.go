package metrics

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics/prometheus/slis"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/httpservetest"
)

func TestMux(t *testing.T) {
	m, reg := newTest(corev1.IPv4Protocol)
	m.EndpointChanges(0, 4)
	mux := Mux(reg)
	for _, tc := range []struct {
		name, path, contentType string
		code                    int
		body                    string // exact, or a substring for /metrics
	}{
		{name: "proxy mode is ipvs", path: "/proxyMode", code: 200, contentType: "text/plain; charset=utf-8", body: "ipvs"},
		{name: "healthz answers ok", path: "/healthz", code: 200, contentType: "text/plain; charset=utf-8", body: "ok"},
		{name: "healthz ping answers ok", path: "/healthz/ping", code: 200, contentType: "text/plain; charset=utf-8", body: "ok"},
		{name: "metrics are the registry's", path: "/metrics", code: 200, contentType: "text/plain",
			body: "kubeproxy_sync_proxy_rules_endpoint_changes_total 4\n"},
		{name: "other paths are not found", path: "/configz", code: 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
			if rec.Code != tc.code {
				t.Fatalf("GET %s = %d, want %d", tc.path, rec.Code, tc.code)
			}
			if tc.code != 200 {
				return
			}
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, tc.contentType) {
				t.Errorf("Content-Type = %q, want %q", ct, tc.contentType)
			}
			body := rec.Body.String()
			if tc.path == "/metrics" {
				if !strings.Contains(body, tc.body) {
					t.Errorf("/metrics lacks %q:\n%s", tc.body, body)
				}
			} else if body != tc.body {
				t.Errorf("GET %s = %q, want %q", tc.path, body, tc.body)
			}
		})
	}
}

func TestNewRegistryHasRuntimeCollectors(t *testing.T) {
	reg := NewRegistry()
	New(reg, corev1.IPv4Protocol)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		seen[mf.GetName()] = true
	}
	for _, name := range []string{"go_goroutines", "process_start_time_seconds", "kubeproxy_sync_proxy_rules_service_changes_total"} {
		if !seen[name] {
			t.Errorf("%s not gathered", name)
		}
	}
}

func TestServe(t *testing.T) {
	t.Run("serves /proxyMode until the context is done", func(t *testing.T) {
		_, reg := newTest(corev1.IPv4Protocol)
		got := httpservetest.ServeAndGet(t, func(ctx context.Context, addr string) error { return Serve(ctx, addr, reg) }, "/proxyMode")
		if got.Body != "ipvs" {
			t.Errorf("GET /proxyMode = %q", got.Body)
		}
	})
	t.Run("listen failure is returned", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		_, reg := newTest()
		err = Serve(context.Background(), l.Addr().String(), reg)
		if err == nil || !strings.Contains(err.Error(), "listen for metrics on "+l.Addr().String()) {
			t.Errorf("Serve on a bound port = %v", err)
		}
	})
}

// TestHealthzIsObservedInTheSLIs: the metrics server's /healthz answers as
// the API server's healthz handler kube-proxy installs there (its ping
// check), and each run of the check is a health-check SLI on
// /metrics/slis; an excluded check is not run.
func TestHealthzIsObservedInTheSLIs(t *testing.T) {
	mux := Mux(prometheus.NewRegistry())
	slis.SLIMetricsWithReset{}.Install(mux)
	get := func(method, path string) string {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("%s %s = %d %s", method, path, rec.Code, rec.Body.String())
		}
		return rec.Body.String()
	}
	get(http.MethodDelete, "/metrics/slis") // reset: other tests may have run the check
	tests := []struct {
		name, path, wantBody string
		wantSLIs             []string // "": the series absent
	}{
		{"no check run, no series", "", "", []string{}},
		{"a check run", "/healthz", "ok", []string{
			`kubernetes_healthcheck{name="ping",type="healthz"} 1`,
			`kubernetes_healthchecks_total{name="ping",status="success",type="healthz"} 1`,
		}},
		{"verbose lists the check, and counts", "/healthz?verbose", "[+]ping ok\nhealthz check passed\n", []string{
			`kubernetes_healthchecks_total{name="ping",status="success",type="healthz"} 2`,
		}},
		{"an excluded check is not run", "/healthz?verbose&exclude=ping&exclude=etcd",
			"[+]ping excluded: ok\nwarn: some health checks cannot be excluded: no matches for \"etcd\"\nhealthz check passed\n", []string{
				`kubernetes_healthchecks_total{name="ping",status="success",type="healthz"} 2`,
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.path != "" {
				if got := get(http.MethodGet, tc.path); got != tc.wantBody {
					t.Errorf("GET %s = %q, want %q", tc.path, got, tc.wantBody)
				}
			}
			body := get(http.MethodGet, "/metrics/slis")
			if len(tc.wantSLIs) == 0 && strings.Contains(body, "kubernetes_healthcheck") {
				t.Errorf("/metrics/slis has health-check series before any check:\n%s", body)
			}
			for _, w := range tc.wantSLIs {
				if !strings.Contains(body, w+"\n") {
					t.Errorf("/metrics/slis lacks %s:\n%s", w, body)
				}
			}
		})
	}
}
