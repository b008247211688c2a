package app

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// TestHostFamilies: metrics and health report the cluster CIDRs'
// families and, as kube-proxy on a dual-stack-capable node, the other
// family when the host has it.
func TestHostFamilies(t *testing.T) {
	v4, v6 := corev1.IPv4Protocol, corev1.IPv6Protocol
	tests := []struct {
		name    string
		cidrs   []string
		hasIPv6 bool
		want    []corev1.IPFamily
	}{
		{"IPv4 cluster on an IPv4-only host", []string{"10.244.0.0/16"}, false, []corev1.IPFamily{v4}},
		{"IPv4 cluster on a dual-stack-capable host reports both", []string{"10.244.0.0/16"}, true, []corev1.IPFamily{v4, v6}},
		{"no cluster CIDR on a dual-stack-capable host reports both", nil, true, []corev1.IPFamily{v4, v6}},
		{"IPv6 cluster reports IPv6 first, then IPv4", []string{"fd00::/48"}, true, []corev1.IPFamily{v6, v4}},
		{"dual-stack cluster keeps its order", []string{"fd00::/48", "10.244.0.0/16"}, true, []corev1.IPFamily{v6, v4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := hostFamilies(tc.cidrs, tc.hasIPv6); !slices.Equal(got, tc.want) {
				t.Errorf("hostFamilies = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestComponentRoutes: the metrics server answers kube-proxy's /configz
// with the effective configuration and /metrics/slis; /metrics carries
// component-base's kubernetes_feature_enabled.
func TestComponentRoutes(t *testing.T) {
	o, _ := mustParse(t, "--hostname-override", "n", "--ipvs-scheduler", "wlc")
	mux := metricsHandler(servedGatherer(prometheus.NewRegistry()), false)
	if err := installComponentRoutes(mux, &o.Config); err != nil {
		t.Fatal(err)
	}
	recordFeatures(t.Context(), nil)
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	code, body := get("/configz")
	var cz map[string]struct {
		IPVS struct{ Scheduler string } `json:"ipvs"`
		Kind string                     `json:"kind"`
	}
	if err := json.Unmarshal([]byte(body), &cz); code != http.StatusOK || err != nil {
		t.Fatalf("/configz: %d %v: %s", code, err, body)
	}
	if c := cz[configzName]; c.IPVS.Scheduler != "wlc" || c.Kind != "KubeProxyConfiguration" {
		t.Errorf("/configz %s = %+v, want the effective configuration (scheduler wlc)", configzName, c)
	}
	if code, body := get("/metrics/slis"); code != http.StatusOK {
		t.Errorf("/metrics/slis: %d %s", code, body)
	}
	if _, body := get("/metrics"); !strings.Contains(body, `kubernetes_feature_enabled{name="WatchListClient",stage="BETA"} 1`) {
		t.Errorf("/metrics lacks client-go's gates in kubernetes_feature_enabled:\n%s", grepLines(body, "kubernetes_feature_enabled"))
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

// TestJSONLogging: --logging-format=json logs JSON lines, as kube-proxy.
func TestJSONLogging(t *testing.T) {
	o, _ := mustParse(t, "--hostname-override", "n", "--logging-format", "json")
	var buf bytes.Buffer
	setupLogging(o, &buf)
	defer klog.ClearLogger()
	klog.Background().Info("Hello", "node", "n")
	var line map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &line); err != nil || line["msg"] != "Hello" || line["node"] != "n" {
		t.Errorf("log line %q: %v, want JSON with msg and node", buf.String(), err)
	}
}

// TestFeatureMetricIsTheGatesAsSeen: kubernetes_feature_enabled labels
// each kube-proxy gate with its v1.36 stage and reports the value the
// proxy acts on: the one given, else the default.
func TestFeatureMetricIsTheGatesAsSeen(t *testing.T) {
	tests := []struct {
		name  string
		gates map[string]bool
		want  []string
	}{
		{"defaults: GA external IPs on, BETA flagz off (not served)", nil, []string{
			`kubernetes_feature_enabled{name="AllowServiceExternalIPs",stage=""} 1`,
			`kubernetes_feature_enabled{name="PreferSameTrafficDistribution",stage=""} 1`,
			`kubernetes_feature_enabled{name="ContextualLogging",stage="BETA"} 1`,
			`kubernetes_feature_enabled{name="ComponentFlagz",stage="BETA"} 0`,
			`kubernetes_feature_enabled{name="LoggingAlphaOptions",stage="ALPHA"} 0`,
		}},
		{"external IPs turned off", map[string]bool{gateAllowServiceExternalIPs: false}, []string{
			`kubernetes_feature_enabled{name="AllowServiceExternalIPs",stage=""} 0`,
		}},
		{"given values win over defaults", map[string]bool{"ContextualLogging": false, "LoggingAlphaOptions": true}, []string{
			`kubernetes_feature_enabled{name="ContextualLogging",stage="BETA"} 0`,
			`kubernetes_feature_enabled{name="LoggingAlphaOptions",stage="ALPHA"} 1`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			recordFeatures(t.Context(), tc.gates)
			rec := httptest.NewRecorder()
			metricsHandler(servedGatherer(prometheus.NewRegistry()), false).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			body := rec.Body.String()
			for _, w := range tc.want {
				if !strings.Contains(body, w+"\n") {
					t.Errorf("/metrics lacks %s:\n%s", w, grepLines(body, "kubernetes_feature_enabled"))
				}
			}
		})
	}
}
