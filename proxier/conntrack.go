package proxier

import (
	"slices"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// UDP conntrack flows. As kube-proxy after a sync that changed a UDP
// service's endpoints, the loop has the data plane delete the UDP flows
// sent to our UDP virtual servers whose replies come from no serving
// endpoint (policy.StaleUDPFlows decides; proxier/udpflows walks the
// table). It reconciles when the rules changed since the last reconcile
// that succeeded: after the sync that changed them, or, when that
// reconcile failed, after the next successful sync or repair.

// setUDP records a service's UDP conntrack rules; a change marks the
// table for a reconcile. The index of every service's rules is changed
// in place, so that a sync costs the services it changed, not every UDP
// service.
func (s *syncState) setUDP(k policy.ServiceKey, rules []policy.UDPServing) {
	if slices.EqualFunc(s.udp[k], rules, equalUDPServing) {
		return
	}
	s.udpRules.SetService(k, s.udp[k], rules)
	if len(rules) == 0 {
		delete(s.udp, k)
	} else {
		s.udp[k] = rules
	}
	s.udpDirty = true
}

// keepUDPOf forgets the UDP rules of the services a full sync's plans
// no longer have.
func (s *syncState) keepUDPOf(plans []policy.ServicePlan) {
	if len(s.udp) == 0 {
		return
	}
	have := make(map[policy.ServiceKey]bool, len(plans))
	for _, sp := range plans {
		have[sp.Service] = true
	}
	for k, old := range s.udp {
		if !have[k] {
			s.udpRules.SetService(k, old, nil)
			delete(s.udp, k)
			s.udpDirty = true
		}
	}
}

func equalUDPServing(a, b policy.UDPServing) bool {
	return a.Frontend == b.Frontend && slices.Equal(a.Endpoints, b.Endpoints)
}

// reconcileConntrack reconciles the conntrack table with the UDP rules
// when they changed, reports each family's result to the Observer, and
// logs a failure, which is tried again after the next sync.
func (p *Proxier) reconcileConntrack() {
	if !p.st.udpDirty {
		return
	}
	results, err := p.dp.ReconcileConntrack(p.st.udpRules)
	for _, r := range results {
		p.obs.ConntrackReconciled(r.Family, r.Elapsed, r.Deleted)
		p.log.V(4).Info("Reconciled UDP conntrack flows", "ipFamily", r.Family, "deleted", r.Deleted, "elapsed", r.Elapsed)
	}
	if err != nil {
		p.log.Error(err, "Cannot delete stale UDP conntrack flows; trying again after the next sync")
		return
	}
	p.st.udpDirty = false
}
