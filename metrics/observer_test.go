package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// t0Seconds is t0 as the timestamp gauges export it.
const t0Seconds = "1.735787045e+09"

func TestObserverMovesSeries(t *testing.T) {
	v4 := []corev1.IPFamily{corev1.IPv4Protocol}
	dual := []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	for _, tc := range []struct {
		name     string
		families []corev1.IPFamily
		calls    func(m *Metrics)
		metrics  []string
		want     string
	}{
		{
			name: "a successful sync sets the last sync timestamp", families: v4,
			calls:   func(m *Metrics) { m.SyncStarted(); m.SyncDone(false, time.Second, nil) },
			metrics: []string{"kubeproxy_sync_proxy_rules_last_timestamp_seconds", "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds"},
			want: `
# HELP kubeproxy_sync_proxy_rules_last_timestamp_seconds [ALPHA] The last time proxy rules were successfully synced
# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} ` + t0Seconds + `
`,
		},
		{
			name: "a failed sync leaves the last sync timestamp alone", families: v4,
			calls:   func(m *Metrics) { m.SyncDone(true, time.Second, errSync) },
			metrics: []string{"kubeproxy_sync_proxy_rules_last_timestamp_seconds"},
			want:    ``,
		},
		{
			name: "one sync moves every family's timestamps", families: dual,
			calls:   func(m *Metrics) { m.Queued(); m.SyncDone(true, time.Second, nil) },
			metrics: []string{"kubeproxy_sync_proxy_rules_last_timestamp_seconds", "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds"},
			want: `
# HELP kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds [ALPHA] The last time a sync of proxy rules was queued
# TYPE kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds gauge
kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family="IPv4"} ` + t0Seconds + `
kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family="IPv6"} ` + t0Seconds + `
# HELP kubeproxy_sync_proxy_rules_last_timestamp_seconds [ALPHA] The last time proxy rules were successfully synced
# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} ` + t0Seconds + `
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv6"} ` + t0Seconds + `
`,
		},
		{
			name: "without families the timestamps are plain gauges", families: nil,
			calls:   func(m *Metrics) {},
			metrics: []string{"kubeproxy_sync_proxy_rules_last_timestamp_seconds"},
			want: `
# HELP kubeproxy_sync_proxy_rules_last_timestamp_seconds [ALPHA] The last time proxy rules were successfully synced
# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge
kubeproxy_sync_proxy_rules_last_timestamp_seconds 0
`,
		},
		{
			name: "change counts: pending is set, total accumulates", families: v4,
			calls: func(m *Metrics) {
				m.ServiceChanges(1, 1)
				m.ServiceChanges(2, 1)
				m.ServiceChanges(0, 0) // a sync took them
				m.EndpointChanges(3, 3)
				m.EndpointChanges(4, -1) // a negative total adds nothing
			},
			metrics: []string{
				"kubeproxy_sync_proxy_rules_service_changes_pending", "kubeproxy_sync_proxy_rules_service_changes_total",
				"kubeproxy_sync_proxy_rules_endpoint_changes_pending", "kubeproxy_sync_proxy_rules_endpoint_changes_total",
			},
			want: `
# HELP kubeproxy_sync_proxy_rules_endpoint_changes_pending [ALPHA] Pending proxy rules Endpoint changes
# TYPE kubeproxy_sync_proxy_rules_endpoint_changes_pending gauge
kubeproxy_sync_proxy_rules_endpoint_changes_pending 4
# HELP kubeproxy_sync_proxy_rules_endpoint_changes_total [ALPHA] Cumulative proxy rules Endpoint changes
# TYPE kubeproxy_sync_proxy_rules_endpoint_changes_total counter
kubeproxy_sync_proxy_rules_endpoint_changes_total 3
# HELP kubeproxy_sync_proxy_rules_service_changes_pending [ALPHA] Pending proxy rules Service changes
# TYPE kubeproxy_sync_proxy_rules_service_changes_pending gauge
kubeproxy_sync_proxy_rules_service_changes_pending 0
# HELP kubeproxy_sync_proxy_rules_service_changes_total [ALPHA] Cumulative proxy rules Service changes
# TYPE kubeproxy_sync_proxy_rules_service_changes_total counter
kubeproxy_sync_proxy_rules_service_changes_total 2
`,
		},
		{
			name: "no local endpoints is replaced each sync, under the primary family", families: dual,
			calls: func(m *Metrics) {
				m.NoLocalEndpoints(TrafficPolicyInternal, 3)
				m.NoLocalEndpoints(TrafficPolicyExternal, 1)
				m.NoLocalEndpoints(TrafficPolicyInternal, 0)
				m.NoLocalEndpointsFor(corev1.IPv6Protocol, TrafficPolicyExternal, 2)
			},
			metrics: []string{"kubeproxy_sync_proxy_rules_no_local_endpoints_total"},
			want: `
# HELP kubeproxy_sync_proxy_rules_no_local_endpoints_total [ALPHA] Number of services with a Local traffic policy and no endpoints
# TYPE kubeproxy_sync_proxy_rules_no_local_endpoints_total gauge
kubeproxy_sync_proxy_rules_no_local_endpoints_total{ip_family="IPv4",traffic_policy="external"} 1
kubeproxy_sync_proxy_rules_no_local_endpoints_total{ip_family="IPv4",traffic_policy="internal"} 0
kubeproxy_sync_proxy_rules_no_local_endpoints_total{ip_family="IPv6",traffic_policy="external"} 2
`,
		},
		{
			name: "virtual servers: a kind that disappears drops to 0", families: v4,
			calls: func(m *Metrics) {
				m.VirtualServers(map[policy.Kind]int{policy.KindClusterIP: 10, policy.KindLoadBalancer: 2})
				m.VirtualServers(map[policy.Kind]int{policy.KindClusterIP: 11, policy.KindNodePort: 4})
			},
			metrics: []string{"kube_ipvs_proxy_virtual_servers"},
			want: `
# HELP kube_ipvs_proxy_virtual_servers IPVS virtual servers in the applied plan, by kind (ClusterIP, NodePort, ExternalIP, LoadBalancer).
# TYPE kube_ipvs_proxy_virtual_servers gauge
kube_ipvs_proxy_virtual_servers{kind="ClusterIP"} 11
kube_ipvs_proxy_virtual_servers{kind="ExternalIP"} 0
kube_ipvs_proxy_virtual_servers{kind="LoadBalancer"} 0
kube_ipvs_proxy_virtual_servers{kind="NodePort"} 4
`,
		},
		{
			name: "draining destinations", families: v4,
			calls:   func(m *Metrics) { m.Draining(5); m.Draining(2) },
			metrics: []string{"kube_ipvs_proxy_draining_destinations"},
			want: `
# HELP kube_ipvs_proxy_draining_destinations IPVS destinations at weight 0, kept until their connections end or the graceful period passes.
# TYPE kube_ipvs_proxy_draining_destinations gauge
kube_ipvs_proxy_draining_destinations 2
`,
		},
		{
			name: "probes are counted by code", families: v4,
			calls: func(m *Metrics) {
				m.HealthzProbe(200)
				m.HealthzProbe(200)
				m.HealthzProbe(503)
				m.LivezProbe(200)
			},
			metrics: []string{"kubeproxy_proxy_healthz_total", "kubeproxy_proxy_livez_total"},
			want: `
# HELP kubeproxy_proxy_healthz_total [ALPHA] Cumulative proxy healthz HTTP status
# TYPE kubeproxy_proxy_healthz_total counter
kubeproxy_proxy_healthz_total{code="200"} 2
kubeproxy_proxy_healthz_total{code="503"} 1
# HELP kubeproxy_proxy_livez_total [ALPHA] Cumulative proxy livez HTTP status
# TYPE kubeproxy_proxy_livez_total counter
kubeproxy_proxy_livez_total{code="200"} 1
`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, reg := newTest(tc.families...)
			tc.calls(m)
			if err := testutil.GatherAndCompare(reg, strings.NewReader(tc.want), tc.metrics...); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestObserverHistograms(t *testing.T) {
	for _, tc := range []struct {
		name      string
		families  []corev1.IPFamily
		calls     func(m *Metrics)
		metric    string
		wantCount map[string]uint64 // ip_family → sample count ("" without the label)
		wantSum   float64           // per series
	}{
		{name: "sync durations are observed, failed ones too",
			families: []corev1.IPFamily{corev1.IPv4Protocol},
			calls: func(m *Metrics) {
				m.SyncDone(true, 250*time.Millisecond, nil)
				m.SyncDone(false, 250*time.Millisecond, errSync)
			},
			metric: "kubeproxy_sync_proxy_rules_duration_seconds", wantCount: map[string]uint64{"IPv4": 2}, wantSum: 0.5},
		{name: "one sync is observed for every family",
			families: []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
			calls:    func(m *Metrics) { m.SyncDone(false, time.Second, nil) },
			metric:   "kubeproxy_sync_proxy_rules_duration_seconds", wantCount: map[string]uint64{"IPv4": 1, "IPv6": 1}, wantSum: 1},
		{name: "network programming latency goes to the primary family",
			families: []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol},
			calls: func(m *Metrics) {
				m.NetworkProgrammingLatency(2 * time.Second)
				m.NetworkProgrammingLatency(3 * time.Second)
			},
			metric: "kubeproxy_network_programming_duration_seconds", wantCount: map[string]uint64{"IPv6": 2}, wantSum: 5},
		{name: "network programming latency without families",
			calls:  func(m *Metrics) { m.NetworkProgrammingLatencyFor(corev1.IPv4Protocol, 4*time.Second) },
			metric: "kubeproxy_network_programming_duration_seconds", wantCount: map[string]uint64{"": 1}, wantSum: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, reg := newTest(tc.families...)
			tc.calls(m)
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]uint64{}
			for _, mf := range mfs {
				if mf.GetName() != tc.metric {
					continue
				}
				for _, s := range mf.GetMetric() {
					family := ""
					for _, lp := range s.GetLabel() {
						if lp.GetName() == "ip_family" {
							family = lp.GetValue()
						}
					}
					got[family] = s.GetHistogram().GetSampleCount()
					if sum := s.GetHistogram().GetSampleSum(); sum != tc.wantSum {
						t.Errorf("%s{%s} sum = %v, want %v", tc.metric, family, sum, tc.wantSum)
					}
				}
			}
			if len(got) != len(tc.wantCount) {
				t.Errorf("%s series = %v, want %v", tc.metric, got, tc.wantCount)
			}
			for f, n := range tc.wantCount {
				if got[f] != n {
					t.Errorf("%s{%s} count = %d, want %d", tc.metric, f, got[f], n)
				}
			}
		})
	}
}

// TestIPVSOpsDeltas feeds cumulative counts, as the IPVS writer reports
// them after each sync, and checks the counter grows by the differences.
func TestIPVSOpsDeltas(t *testing.T) {
	header := `
# HELP kube_ipvs_proxy_netlink_ops_total IPVS kernel changes made, by kind (add-service, delete-destination, ...) and result (attempted, error).
# TYPE kube_ipvs_proxy_netlink_ops_total counter
`
	for _, tc := range []struct {
		name  string
		calls []map[string]int
		want  string
	}{
		{name: "first report is exported whole",
			calls: []map[string]int{{"add-service": 3, "add-destination": 5}},
			want: `kube_ipvs_proxy_netlink_ops_total{kind="add-destination",result="attempted"} 5
kube_ipvs_proxy_netlink_ops_total{kind="add-service",result="attempted"} 3
`},
		{name: "later reports add only the growth",
			calls: []map[string]int{{"add-service": 3}, {"add-service": 3}, {"add-service": 7, "delete-service": 1}},
			want: `kube_ipvs_proxy_netlink_ops_total{kind="add-service",result="attempted"} 7
kube_ipvs_proxy_netlink_ops_total{kind="delete-service",result="attempted"} 1
`},
		{name: "kinds missing from a report keep their count",
			calls: []map[string]int{{"add-service": 3, "set-sysctl": 2}, {"add-service": 4}, {"add-service": 4, "set-sysctl": 3}},
			want: `kube_ipvs_proxy_netlink_ops_total{kind="add-service",result="attempted"} 4
kube_ipvs_proxy_netlink_ops_total{kind="set-sysctl",result="attempted"} 3
`},
		{name: "failures without a kind are counted under all",
			calls: []map[string]int{{"add-service": 2, "error": 1}, {"add-service": 5, "error": 3}},
			want: `kube_ipvs_proxy_netlink_ops_total{kind="add-service",result="attempted"} 5
kube_ipvs_proxy_netlink_ops_total{kind="all",result="error"} 3
`},
		{name: "per-kind results are split on the slash",
			calls: []map[string]int{{"add-service": 2, "add-service/error": 1}},
			want: `kube_ipvs_proxy_netlink_ops_total{kind="add-service",result="attempted"} 2
kube_ipvs_proxy_netlink_ops_total{kind="add-service",result="error"} 1
`},
		{name: "a writer restarted from zero counts anew",
			calls: []map[string]int{{"add-service": 10}, {"add-service": 2}, {"add-service": 5}},
			want: `kube_ipvs_proxy_netlink_ops_total{kind="add-service",result="attempted"} 15
`},
		{name: "zero counts still create the series",
			calls: []map[string]int{{"delete-link": 0}},
			want: `kube_ipvs_proxy_netlink_ops_total{kind="delete-link",result="attempted"} 0
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, reg := newTest(corev1.IPv4Protocol)
			for _, ops := range tc.calls {
				m.IPVSOps(ops)
			}
			if err := testutil.GatherAndCompare(reg, strings.NewReader(header+tc.want), "kube_ipvs_proxy_netlink_ops_total"); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestRepeatedFamiliesCountOnce(t *testing.T) {
	m, reg := newTest(corev1.IPv4Protocol, corev1.IPv4Protocol)
	m.SyncDone(false, time.Second, nil)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "kubeproxy_sync_proxy_rules_duration_seconds" {
			if n := len(mf.GetMetric()); n != 1 {
				t.Fatalf("%d series, want 1", n)
			}
			if c := mf.GetMetric()[0].GetHistogram().GetSampleCount(); c != 1 {
				t.Errorf("count = %d, want 1", c)
			}
		}
	}
}
