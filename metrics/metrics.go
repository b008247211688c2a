package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// Name prefixes: kube-proxy's subsystem for its metrics, ours for the rest.
const (
	kubeProxySubsystem = "kubeproxy"
	ourNamespace       = "kube_ipvs_proxy"
	// alpha is how component-base annotates the help of kube-proxy's
	// metrics, all of stability level ALPHA.
	alpha = "[ALPHA] "
)

// Label names, as kube-proxy's.
const (
	labelIPFamily      = "ip_family"
	labelTrafficPolicy = "traffic_policy"
	labelCode          = "code"
	labelKind          = "kind"
	labelResult        = "result"
	labelReason        = "reason"
)

// Traffic policy label values of NoLocalEndpoints, as kube-proxy's.
const (
	TrafficPolicyInternal = "internal"
	TrafficPolicyExternal = "external"
)

// Kernel operation results of kube_ipvs_proxy_netlink_ops_total (see
// IPVSOps).
const (
	ResultAttempted = "attempted"
	ResultError     = "error"
	// KindAll labels failures the writer counts without their kind.
	KindAll = "all"
)

// syncBuckets are kube-proxy's sync_proxy_rules_duration_seconds buckets:
// 1ms doubling 15 times (to 16.384s).
var syncBuckets = prometheus.ExponentialBuckets(0.001, 2, 15)

// programmingBuckets are kube-proxy's network_programming_duration_seconds
// buckets, including the leading 0 that component-base's MergeBuckets puts
// first: 0, 0.25s, 0.5s, 1..59s, 60..115s by 5s, 120..300s by 30s.
var programmingBuckets = mergeBuckets(
	prometheus.LinearBuckets(0.25, 0.25, 2),
	prometheus.LinearBuckets(1, 1, 59),
	prometheus.LinearBuckets(60, 5, 12),
	prometheus.LinearBuckets(120, 30, 7),
)

func mergeBuckets(parts ...[]float64) []float64 {
	out := []float64{0}
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// kinds are the virtual server kinds always exported, at 0 when absent.
var kinds = []policy.Kind{policy.KindClusterIP, policy.KindNodePort, policy.KindExternalIP, policy.KindLoadBalancer}

// Metrics holds every metric of the proxy, registered on one Registerer.
// It implements the sync loop's proxier.Observer seam and
// health.ProbeObserver, and is safe for concurrent use.
type Metrics struct {
	now func() time.Time
	// families are the ip_family label values of the per-sync metrics,
	// or one empty set of label values when the label is off.
	families [][]string
	// primary is the ip_family label values of per-event metrics, whose
	// family the Observer seam does not carry.
	primary  []string
	byFamily bool

	syncDuration    *prometheus.HistogramVec
	lastSync        *prometheus.GaugeVec
	lastQueued      *prometheus.GaugeVec
	programming     *prometheus.HistogramVec
	noLocal         *prometheus.GaugeVec
	endpointPending prometheus.Gauge
	endpointTotal   prometheus.Counter
	servicePending  prometheus.Gauge
	serviceTotal    prometheus.Counter
	healthz         *prometheus.CounterVec
	livez           *prometheus.CounterVec

	netlinkOps     *prometheus.CounterVec
	draining       prometheus.Gauge
	virtualServers *prometheus.GaugeVec
	serviceErrors  *prometheus.CounterVec
	failing        prometheus.Gauge

	conntrackDuration *prometheus.HistogramVec
	conntrackDeleted  *prometheus.CounterVec

	mu      sync.Mutex
	lastOps map[string]int       // the writer's cumulative counts at the last IPVSOps
	kinds   map[policy.Kind]bool // kinds exported so far
}

// New creates every metric and registers it on reg; it panics if one is
// already registered there (a wiring bug). families are the IP families
// the proxy serves (repeats ignored), the first being the primary one.
// Given, kube-proxy's per-family metrics carry kube-proxy ≥ 1.33's
// ip_family label ("IPv4", "IPv6"); without, they have kube-proxy ≤ 1.32's
// label set.
func New(reg prometheus.Registerer, families ...corev1.IPFamily) *Metrics {
	m := &Metrics{now: time.Now, lastOps: map[string]int{}, kinds: map[policy.Kind]bool{}}
	var famLabels []string
	if len(families) > 0 {
		m.byFamily = true
		famLabels = []string{labelIPFamily}
		seen := map[corev1.IPFamily]bool{}
		for _, f := range families {
			if !seen[f] {
				seen[f] = true
				m.families = append(m.families, []string{string(f)})
			}
		}
		m.primary = m.families[0]
	} else {
		m.families = [][]string{{}}
		m.primary = []string{}
	}
	m.define(famLabels)
	reg.MustRegister(m.collectors()...)
	if !m.byFamily {
		// Before 1.33 these were plain metrics, exported from the start.
		m.syncDuration.WithLabelValues()
		m.lastSync.WithLabelValues()
		m.lastQueued.WithLabelValues()
		m.programming.WithLabelValues()
	}
	for _, k := range kinds {
		m.virtualServers.WithLabelValues(string(k)).Set(0)
		m.kinds[k] = true
	}
	return m
}

// define creates the metrics; famLabels is ["ip_family"] or none.
func (m *Metrics) define(famLabels []string) {
	m.syncDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: kubeProxySubsystem, Name: "sync_proxy_rules_duration_seconds",
		Help: alpha + "SyncProxyRules latency in seconds", Buckets: syncBuckets,
	}, famLabels)
	m.lastSync = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: kubeProxySubsystem, Name: "sync_proxy_rules_last_timestamp_seconds",
		Help: alpha + "The last time proxy rules were successfully synced",
	}, famLabels)
	m.lastQueued = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: kubeProxySubsystem, Name: "sync_proxy_rules_last_queued_timestamp_seconds",
		Help: alpha + "The last time a sync of proxy rules was queued",
	}, famLabels)
	m.programming = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: kubeProxySubsystem, Name: "network_programming_duration_seconds",
		Help: alpha + "In Cluster Network Programming Latency in seconds", Buckets: programmingBuckets,
	}, famLabels)
	m.noLocal = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: kubeProxySubsystem, Name: "sync_proxy_rules_no_local_endpoints_total",
		Help: alpha + "Number of services with a Local traffic policy and no endpoints",
	}, append(famLabels, labelTrafficPolicy))
	m.endpointPending = prometheus.NewGauge(prometheus.GaugeOpts{
		Subsystem: kubeProxySubsystem, Name: "sync_proxy_rules_endpoint_changes_pending",
		Help: alpha + "Pending proxy rules Endpoint changes",
	})
	m.endpointTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Subsystem: kubeProxySubsystem, Name: "sync_proxy_rules_endpoint_changes_total",
		Help: alpha + "Cumulative proxy rules Endpoint changes",
	})
	m.servicePending = prometheus.NewGauge(prometheus.GaugeOpts{
		Subsystem: kubeProxySubsystem, Name: "sync_proxy_rules_service_changes_pending",
		Help: alpha + "Pending proxy rules Service changes",
	})
	m.serviceTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Subsystem: kubeProxySubsystem, Name: "sync_proxy_rules_service_changes_total",
		Help: alpha + "Cumulative proxy rules Service changes",
	})
	m.healthz = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: kubeProxySubsystem, Name: "proxy_healthz_total",
		Help: alpha + "Cumulative proxy healthz HTTP status",
	}, []string{labelCode})
	m.livez = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: kubeProxySubsystem, Name: "proxy_livez_total",
		Help: alpha + "Cumulative proxy livez HTTP status",
	}, []string{labelCode})
	m.netlinkOps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ourNamespace, Name: "netlink_ops_total",
		Help: "IPVS kernel changes made, by kind (add-service, delete-destination, ...) and result (attempted, error).",
	}, []string{labelKind, labelResult})
	m.draining = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: ourNamespace, Name: "draining_destinations",
		Help: "IPVS destinations at weight 0, kept until their connections end or the graceful period passes.",
	})
	m.virtualServers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: ourNamespace, Name: "virtual_servers",
		Help: "IPVS virtual servers in the applied plan, by kind (ClusterIP, NodePort, ExternalIP, LoadBalancer).",
	}, []string{labelKind})
	m.serviceErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ourNamespace, Name: "service_sync_errors_total",
		Help: "Failures confined to one service's virtual servers (the rest of the sync succeeded), by reason (KernelError, Invalid, Conflict).",
	}, []string{labelReason})
	m.failing = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: ourNamespace, Name: "failing_services",
		Help: "Services whose virtual servers failed to program and are retried with backoff.",
	})
	// The conntrack reconciler's carry ip_family whatever famLabels:
	// kube-proxy's have had it since they appeared, and the reconciler
	// knows each run's family.
	m.conntrackDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: kubeProxySubsystem, Name: "conntrack_reconciler_sync_duration_seconds",
		Help: alpha + "ReconcileConntrackFlowsLatency latency in seconds", Buckets: syncBuckets,
	}, []string{labelIPFamily})
	m.conntrackDeleted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: kubeProxySubsystem, Name: "conntrack_reconciler_deleted_entries_total",
		Help: alpha + "Cumulative conntrack flows deleted by conntrack reconciler",
	}, []string{labelIPFamily})
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		m.syncDuration, m.lastSync, m.lastQueued, m.programming, m.noLocal,
		m.endpointPending, m.endpointTotal, m.servicePending, m.serviceTotal,
		m.healthz, m.livez, m.netlinkOps, m.draining, m.virtualServers,
		m.serviceErrors, m.failing, m.conntrackDuration, m.conntrackDeleted,
	}
}
