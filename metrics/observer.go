package metrics

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// The methods of the sync loop's Observer seam. One sync programs every IP
// family, so per-sync metrics move every family's series, as a dual-stack
// kube-proxy's two proxiers would each have synced; per-event metrics go
// to the primary family unless given one (the ...For methods).

// SyncStarted is part of the Observer seam; kube-proxy records nothing
// when a sync begins, and neither do we.
func (m *Metrics) SyncStarted() {}

// SyncDone observes the sync's duration, failed or not, and on success
// sets the last synced timestamp, as kube-proxy. full is not exported:
// kube-proxy's IPVS mode has no full/partial split.
func (m *Metrics) SyncDone(_ bool, d time.Duration, err error) {
	for _, f := range m.families {
		m.syncDuration.WithLabelValues(f...).Observe(d.Seconds())
	}
	if err != nil {
		return
	}
	now := unixSeconds(m.now())
	for _, f := range m.families {
		m.lastSync.WithLabelValues(f...).Set(now)
	}
}

// Queued sets the last queued timestamp to now.
func (m *Metrics) Queued() {
	now := unixSeconds(m.now())
	for _, f := range m.families {
		m.lastQueued.WithLabelValues(f...).Set(now)
	}
}

// ServiceChanges sets the pending Service changes and adds total (when
// positive) to the cumulative count.
func (m *Metrics) ServiceChanges(pending int, total int) {
	m.servicePending.Set(float64(pending))
	if total > 0 {
		m.serviceTotal.Add(float64(total))
	}
}

// EndpointChanges sets the pending EndpointSlice changes and adds total
// (when positive) to the cumulative count.
func (m *Metrics) EndpointChanges(pending int, total int) {
	m.endpointPending.Set(float64(pending))
	if total > 0 {
		m.endpointTotal.Add(float64(total))
	}
}

// NetworkProgrammingLatency observes the time from a change's trigger time
// to its sync, under the primary family. A negative d (clock skew between
// the control plane and the node) lands in the 0 bucket, as kube-proxy's.
func (m *Metrics) NetworkProgrammingLatency(d time.Duration) {
	m.programming.WithLabelValues(m.primary...).Observe(d.Seconds())
}

// NetworkProgrammingLatencyFor is NetworkProgrammingLatency for an
// EndpointSlice of the given family.
func (m *Metrics) NetworkProgrammingLatencyFor(family corev1.IPFamily, d time.Duration) {
	m.programming.WithLabelValues(m.familyValues(family)...).Observe(d.Seconds())
}

// NoLocalEndpoints sets, after a sync, how many services with the given
// Local traffic policy ("internal" or "external") have no local endpoint,
// under the primary family.
func (m *Metrics) NoLocalEndpoints(trafficPolicy string, n int) {
	m.noLocal.WithLabelValues(append(slices.Clone(m.primary), trafficPolicy)...).Set(float64(n))
}

// NoLocalEndpointsFor is NoLocalEndpoints for one IP family.
func (m *Metrics) NoLocalEndpointsFor(family corev1.IPFamily, trafficPolicy string, n int) {
	m.noLocal.WithLabelValues(append(m.familyValues(family), trafficPolicy)...).Set(float64(n))
}

// familyValues is the ip_family label values for family: none when the
// label is off.
func (m *Metrics) familyValues(family corev1.IPFamily) []string {
	if !m.byFamily {
		return []string{}
	}
	return []string{string(family)}
}

// VirtualServers sets the number of virtual servers by kind; a kind
// missing from byKind has none.
func (m *Metrics) VirtualServers(byKind map[policy.Kind]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range byKind {
		m.kinds[k] = true
	}
	for k := range m.kinds {
		m.virtualServers.WithLabelValues(string(k)).Set(float64(byKind[k]))
	}
}

// IPVSOps takes the IPVS writer's cumulative operation counts and adds
// what grew since the last call to kube_ipvs_proxy_netlink_ops_total. Keys
// are read as proxier/ipvs.Writer.Ops returns them:
//   - "<kind>" counts every attempt of that kind, failed ones included:
//     {kind="<kind>", result="attempted"};
//   - "error" counts failures of any kind: {kind="all", result="error"};
//   - "<kind>/<result>" is exported as {kind="<kind>", result="<result>"},
//     for a writer that counts per-kind results.
//
// A count lower than last time means the writer restarted from zero: the
// whole count is new. Keys absent from ops keep their last count.
func (m *Metrics) IPVSOps(ops map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, key := range slices.Sorted(maps.Keys(ops)) {
		cur, prev := ops[key], m.lastOps[key]
		delta := cur - prev
		if cur < prev {
			delta = cur
		}
		m.lastOps[key] = cur
		kind, result := opLabels(key)
		c := m.netlinkOps.WithLabelValues(kind, result)
		if delta > 0 {
			c.Add(float64(delta))
		}
	}
}

func opLabels(key string) (kind, result string) {
	if key == ResultError {
		return KindAll, ResultError
	}
	if k, r, ok := strings.Cut(key, "/"); ok {
		return k, r
	}
	return key, ResultAttempted
}

// Draining sets the number of draining destinations.
func (m *Metrics) Draining(n int) { m.draining.Set(float64(n)) }

// ServiceFailure counts one service's failure to program its virtual
// servers, by reason.
func (m *Metrics) ServiceFailure(reason string) { m.serviceErrors.WithLabelValues(reason).Inc() }

// FailingServices sets the number of services retried with backoff.
func (m *Metrics) FailingServices(n int) { m.failing.Set(float64(n)) }

// ConntrackReconciled observes one family's UDP conntrack reconcile, as
// kube-proxy's CleanStaleEntries: its duration
// (kubeproxy_conntrack_reconciler_sync_duration_seconds) and the flows it
// deleted (kubeproxy_conntrack_reconciler_deleted_entries_total).
func (m *Metrics) ConntrackReconciled(family corev1.IPFamily, d time.Duration, deleted int) {
	m.conntrackDuration.WithLabelValues(string(family)).Observe(d.Seconds())
	m.conntrackDeleted.WithLabelValues(string(family)).Add(float64(deleted))
}

// HealthzProbe counts a /healthz answer by status code
// (kubeproxy_proxy_healthz_total{code}); part of health.ProbeObserver.
func (m *Metrics) HealthzProbe(code int) { m.healthz.WithLabelValues(strconv.Itoa(code)).Inc() }

// LivezProbe counts a /livez answer by status code
// (kubeproxy_proxy_livez_total{code}); part of health.ProbeObserver.
func (m *Metrics) LivezProbe(code int) { m.livez.WithLabelValues(strconv.Itoa(code)).Inc() }

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
