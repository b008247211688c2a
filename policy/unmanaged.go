package policy

import (
	"net/netip"
	"slices"
)

// Services the proxy does not manage: another proxy's (labelled
// service.kubernetes.io/service-proxy-name), or skipped as invalid. They
// are not served, but they still hold what the apiserver gave them and
// still carry traffic:
//   - their ClusterIPs stay theirs, on every port: an external or
//     load-balancer IP equal to one is refused as it is for a served
//     Service's (addresses.go), so a tenant cannot take another proxy's
//     Service's address here;
//   - their endpoints are tracked, by whoever serves them: a NOTRACK
//     Service sharing one is served tracked (notrack.go).
//
// A Service the engine serves is never unmanaged: UpsertService forgets
// its entry, and SetUnmanagedService of a served Service is ignored (an
// invalid update keeps the previous version served, with its ClusterIPs).

// SetUnmanagedService records a Service the proxy does not serve, with
// the ClusterIPs it holds (none for a headless one). Its plan is empty;
// the services its ClusterIPs or endpoints affect are reported by
// Reassigned.
func (e *Engine) SetUnmanagedService(key ServiceKey, clusterIPs []netip.Addr) {
	if _, served := e.services[key]; served {
		return
	}
	_, was := e.unmanaged[key]
	clusterIPs = slices.Clone(clusterIPs)
	if clusterIPs == nil {
		clusterIPs = []netip.Addr{}
	}
	affected := e.editUnmanaged(key, clusterIPs)
	e.unmanaged[key] = clusterIPs
	e.reclaim(affected)
	if !was {
		e.markReassigned(e.noTrackReachable([]ServiceKey{key}))
	}
}

// DeleteUnmanagedService forgets a Service recorded by
// SetUnmanagedService; nothing when there is none.
func (e *Engine) DeleteUnmanagedService(key ServiceKey) { e.reclaim(e.forgetUnmanaged(key)) }

// forgetUnmanaged drops key's entry and returns the services its
// ClusterIPs going changes.
func (e *Engine) forgetUnmanaged(key ServiceKey) []ServiceKey {
	if _, ok := e.unmanaged[key]; !ok {
		return nil
	}
	affected := e.editUnmanaged(key, nil)
	delete(e.unmanaged, key)
	e.markReassigned(e.noTrackReachable([]ServiceKey{key}))
	return affected
}

// editUnmanaged moves key's ClusterIP entries from its recorded ones to
// now, and returns the services listing a changed address as an external
// or load-balancer IP.
func (e *Engine) editUnmanaged(key ServiceKey, now []netip.Addr) []ServiceKey {
	var affected []ServiceKey
	for _, a := range editIndex(e.clusterIPOf, key, e.unmanaged[key], now) {
		for _, k := range e.externalUsers[a] {
			if k != key && !slices.Contains(affected, k) {
				affected = append(affected, k)
			}
		}
	}
	return affected
}

// isUnmanaged reports whether k is a Service the proxy does not serve.
func (e *Engine) isUnmanaged(k ServiceKey) bool {
	_, ok := e.unmanaged[k]
	return ok
}
