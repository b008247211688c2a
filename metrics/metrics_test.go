package metrics

import (
	"bytes"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/health"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/golden"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// observer is proxier.Observer's method set, copied so that this package
// need not import proxier.
type observer interface {
	SyncStarted()
	SyncDone(full bool, d time.Duration, err error)
	Queued()
	ServiceChanges(pending int, total int)
	EndpointChanges(pending int, total int)
	NetworkProgrammingLatency(d time.Duration)
	NoLocalEndpoints(trafficPolicy string, n int)
	VirtualServers(byKind map[policy.Kind]int)
	IPVSOps(ops map[string]int)
	Draining(n int)
	ConntrackReconciled(family corev1.IPFamily, d time.Duration, deleted int)
}

var (
	_ observer             = (*Metrics)(nil)
	_ health.ProbeObserver = (*Metrics)(nil)
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func newTest(families ...corev1.IPFamily) (*Metrics, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	m := New(reg, families...)
	m.now = func() time.Time { return t0 }
	return m, reg
}

// touchAll moves every metric once, so that every vector has a series.
func touchAll(m *Metrics) {
	m.SyncStarted()
	m.Queued()
	m.SyncDone(true, 3*time.Millisecond, nil)
	m.ServiceChanges(2, 5)
	m.EndpointChanges(1, 7)
	m.NetworkProgrammingLatency(1500 * time.Millisecond)
	m.NoLocalEndpoints(TrafficPolicyInternal, 1)
	m.NoLocalEndpoints(TrafficPolicyExternal, 2)
	m.VirtualServers(map[policy.Kind]int{policy.KindClusterIP: 4, policy.KindNodePort: 2})
	m.IPVSOps(map[string]int{"add-service": 6, "add-destination": 9, "error": 1})
	m.Draining(3)
	m.ServiceFailure("KernelError")
	m.FailingServices(1)
	m.ConntrackReconciled(corev1.IPv4Protocol, 5*time.Millisecond, 3)
	m.HealthzProbe(200)
	m.LivezProbe(503)
}

// TestKubeProxyNames checks every exported name, help text, type and label
// set against kube-proxy's pkg/proxy/metrics/metrics.go (help texts carry
// component-base's "[ALPHA] " prefix, as kube-proxy serves them).
func TestKubeProxyNames(t *testing.T) {
	type want struct {
		help   string
		typ    dto.MetricType
		labels []string // with families; the ip_family label is dropped without
	}
	const (
		counter   = dto.MetricType_COUNTER
		gauge     = dto.MetricType_GAUGE
		histogram = dto.MetricType_HISTOGRAM
	)
	wants := map[string]want{
		"kubeproxy_sync_proxy_rules_duration_seconds":              {"[ALPHA] SyncProxyRules latency in seconds", histogram, []string{"ip_family"}},
		"kubeproxy_sync_proxy_rules_last_timestamp_seconds":        {"[ALPHA] The last time proxy rules were successfully synced", gauge, []string{"ip_family"}},
		"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds": {"[ALPHA] The last time a sync of proxy rules was queued", gauge, []string{"ip_family"}},
		"kubeproxy_network_programming_duration_seconds":           {"[ALPHA] In Cluster Network Programming Latency in seconds", histogram, []string{"ip_family"}},
		"kubeproxy_sync_proxy_rules_endpoint_changes_pending":      {"[ALPHA] Pending proxy rules Endpoint changes", gauge, nil},
		"kubeproxy_sync_proxy_rules_endpoint_changes_total":        {"[ALPHA] Cumulative proxy rules Endpoint changes", counter, nil},
		"kubeproxy_sync_proxy_rules_service_changes_pending":       {"[ALPHA] Pending proxy rules Service changes", gauge, nil},
		"kubeproxy_sync_proxy_rules_service_changes_total":         {"[ALPHA] Cumulative proxy rules Service changes", counter, nil},
		"kubeproxy_sync_proxy_rules_no_local_endpoints_total":      {"[ALPHA] Number of services with a Local traffic policy and no endpoints", gauge, []string{"ip_family", "traffic_policy"}},
		"kubeproxy_proxy_healthz_total":                            {"[ALPHA] Cumulative proxy healthz HTTP status", counter, []string{"code"}},
		"kubeproxy_proxy_livez_total":                              {"[ALPHA] Cumulative proxy livez HTTP status", counter, []string{"code"}},
		"kube_ipvs_proxy_netlink_ops_total":                        {"", counter, []string{"kind", "result"}},
		"kube_ipvs_proxy_draining_destinations":                    {"", gauge, nil},
		"kube_ipvs_proxy_virtual_servers":                          {"", gauge, []string{"kind"}},
		"kube_ipvs_proxy_service_sync_errors_total":                {"", counter, []string{"reason"}},
		"kube_ipvs_proxy_failing_services":                         {"", gauge, nil},
		"kubeproxy_conntrack_reconciler_sync_duration_seconds":     {"[ALPHA] ReconcileConntrackFlowsLatency latency in seconds", histogram, []string{"ip_family"}},
		"kubeproxy_conntrack_reconciler_deleted_entries_total":     {"[ALPHA] Cumulative conntrack flows deleted by conntrack reconciler", counter, []string{"ip_family"}},
	}
	// alwaysFamily are the metrics that have ip_family in kube-proxy 1.32
	// too.
	alwaysFamily := map[string]bool{
		"kubeproxy_conntrack_reconciler_sync_duration_seconds": true,
		"kubeproxy_conntrack_reconciler_deleted_entries_total": true,
	}
	for _, tc := range []struct {
		name     string
		families []corev1.IPFamily
	}{
		{name: "with ip_family as kube-proxy 1.33+", families: []corev1.IPFamily{corev1.IPv4Protocol}},
		{name: "without ip_family as kube-proxy 1.32", families: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, reg := newTest(tc.families...)
			touchAll(m)
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, mf := range mfs {
				name := mf.GetName()
				got[name] = true
				w, ok := wants[name]
				if !ok {
					t.Errorf("unexpected metric %s", name)
					continue
				}
				if w.help != "" && mf.GetHelp() != w.help {
					t.Errorf("%s help = %q, want %q", name, mf.GetHelp(), w.help)
				}
				if mf.GetType() != w.typ {
					t.Errorf("%s type = %v, want %v", name, mf.GetType(), w.typ)
				}
				wantLabels := w.labels
				if tc.families == nil && !alwaysFamily[name] {
					wantLabels = slices.DeleteFunc(slices.Clone(wantLabels), func(l string) bool { return l == "ip_family" })
				}
				for _, metric := range mf.GetMetric() {
					var names []string
					for _, lp := range metric.GetLabel() {
						names = append(names, lp.GetName())
					}
					if !slices.Equal(names, wantLabels) {
						t.Errorf("%s labels = %v, want %v", name, names, wantLabels)
					}
				}
			}
			for name := range wants {
				if !got[name] {
					t.Errorf("metric %s not exported", name)
				}
			}
		})
	}
}

func TestBuckets(t *testing.T) {
	wantSync := []float64{0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192, 16.384}
	if !slices.EqualFunc(syncBuckets, wantSync, func(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 }) {
		t.Errorf("sync buckets = %v, want %v", syncBuckets, wantSync)
	}
	wantProg := []float64{0, 0.25, 0.5}
	for s := 1; s <= 59; s++ {
		wantProg = append(wantProg, float64(s))
	}
	for s := 60; s <= 115; s += 5 {
		wantProg = append(wantProg, float64(s))
	}
	for s := 120; s <= 300; s += 30 {
		wantProg = append(wantProg, float64(s))
	}
	if !slices.Equal(programmingBuckets, wantProg) {
		t.Errorf("network programming buckets = %v\nwant %v", programmingBuckets, wantProg)
	}
}

// TestExposition compares the whole /metrics text after touchAll with
// testdata/<name>.golden (go test -update rewrites them).
func TestExposition(t *testing.T) {
	for _, tc := range []struct {
		name     string
		families []corev1.IPFamily
	}{
		{name: "ipv4", families: []corev1.IPFamily{corev1.IPv4Protocol}},
		{name: "dual-stack", families: []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}},
		{name: "no-family", families: nil},
		{name: "fresh", families: []corev1.IPFamily{corev1.IPv4Protocol}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, reg := newTest(tc.families...)
			if tc.name != "fresh" {
				touchAll(m)
			}
			want := golden.Load(t, filepath.Join("testdata", tc.name+".golden"), gatherText(t, reg))
			if err := testutil.GatherAndCompare(reg, bytes.NewReader(want)); err != nil {
				t.Error(err)
			}
		})
	}
}

func gatherText(t *testing.T, g prometheus.Gatherer) []byte {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// errSync is a failed sync's error.
var errSync = errors.New("add virtual server 10.96.0.1:443/TCP: file exists")
