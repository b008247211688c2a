package proxier

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/backoff"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// syncState is what the sync goroutine remembers between syncs; only it
// touches it.
type syncState struct {
	// applied is what is kept of the last computed plan of each service,
	// as given to the data plane. Services without virtual servers or
	// health check are left out.
	applied map[policy.ServiceKey]appliedPlan
	totals  totals
	buf     []byte // digestOf's scratch space
	// The healthCheckNodePort services and their local ready endpoints;
	// healthDirty says ServiceHealth has not seen them yet.
	hcPorts     map[policy.ServiceKey]uint16
	localReady  map[policy.ServiceKey]int
	healthDirty bool
	// full says the next sync must be a Resync: none succeeded yet, or
	// the last one failed.
	full bool
	// lastEnd is when the last sync ended, for MinSyncPeriod between a
	// repair's slices.
	lastEnd time.Time
	// synced says some sync succeeded; failed that one failed since the
	// last success.
	synced, failed bool
	// udp holds each service's UDP conntrack rules
	// (ServicePlan.UDPServing) and udpRules all of them, indexed;
	// udpDirty says they changed since the conntrack table was last
	// reconciled with them (conntrack.go).
	udp      map[policy.ServiceKey][]policy.UDPServing
	udpRules policy.StaleUDPFlows
	udpDirty bool
}

func newSyncState() syncState {
	return syncState{applied: map[policy.ServiceKey]appliedPlan{}, totals: newTotals(),
		hcPorts: map[policy.ServiceKey]uint16{}, localReady: map[policy.ServiceKey]int{}, healthDirty: true, full: true,
		udp: map[policy.ServiceKey][]policy.UDPServing{}}
}

// totals are the gauges summed over the applied plans.
type totals struct {
	byKind                           map[policy.Kind]int
	noLocalInternal, noLocalExternal int // services dropping for want of a local endpoint
}

// gaugeKinds are the kinds the virtual servers gauge always reports.
var gaugeKinds = [...]policy.Kind{policy.KindClusterIP, policy.KindNodePort, policy.KindExternalIP, policy.KindLoadBalancer}

func newTotals() totals {
	t := totals{byKind: map[policy.Kind]int{}}
	for _, k := range gaugeKinds {
		t.byKind[k] = 0
	}
	return t
}

// add adds (sign 1) or removes (sign -1) one service's plan. A service
// counts as having no local endpoints, as kube-proxy, when a virtual
// server under a Local traffic policy drops its traffic (WhenEmpty Drop:
// the service has endpoints, none on this node).
func (t *totals) add(ap appliedPlan, sign int) {
	for i, n := range ap.kinds {
		if n > 0 {
			t.byKind[gaugeKinds[i]] += sign * int(n)
		}
	}
	if ap.otherKinds != nil {
		for _, k := range *ap.otherKinds {
			t.byKind[k] += sign
		}
	}
	if ap.noLocalInternal {
		t.noLocalInternal += sign
	}
	if ap.noLocalExternal {
		t.noLocalExternal += sign
	}
}

// appliedPlan is what the loop keeps of a service's applied plan: its
// digest, and what the gauges sum.
type appliedPlan struct {
	digest planDigest
	// kinds counts the virtual servers of each of gaugeKinds: an array,
	// not a list of kinds, so that a service's summary allocates
	// nothing; otherKinds lists any other kind, behind a pointer because
	// the engine makes none: the loop keeps one appliedPlan per service.
	kinds      [len(gaugeKinds)]uint32
	otherKinds *[]policy.Kind
	// noLocalInternal, noLocalExternal: the service drops its internal
	// (external) traffic for want of a local endpoint.
	noLocalInternal, noLocalExternal bool
}

// summary returns what is kept of sp.
func (s *syncState) summary(sp policy.ServicePlan) appliedPlan {
	var ap appliedPlan
	ap.digest, s.buf = digestOf(sp.VirtualServers, s.buf)
	for i := range sp.VirtualServers {
		vs := &sp.VirtualServers[i]
		if j := slices.Index(gaugeKinds[:], vs.Kind); j >= 0 {
			ap.kinds[j]++
		} else {
			if ap.otherKinds == nil {
				ap.otherKinds = new([]policy.Kind)
			}
			*ap.otherKinds = append(*ap.otherKinds, vs.Kind)
		}
		if vs.TrafficPolicy == policy.PolicyLocal && len(vs.Destinations) == 0 && vs.WhenEmpty == policy.EmptyDrop {
			ap.noLocalInternal = ap.noLocalInternal || vs.Kind == policy.KindClusterIP
			ap.noLocalExternal = ap.noLocalExternal || vs.Kind != policy.KindClusterIP
		}
	}
	return ap
}

// set records a service's new plan.
func (s *syncState) set(sp policy.ServicePlan) {
	s.record(sp, s.summary(sp))
}

// record records a service's new plan, summarized as ap.
func (s *syncState) record(sp policy.ServicePlan, ap appliedPlan) {
	k := sp.Service
	s.setUDP(k, sp.UDPServing)
	s.totals.add(s.applied[k], -1)
	s.totals.add(ap, 1)
	if len(sp.VirtualServers) == 0 && sp.HealthCheckNodePort == 0 {
		delete(s.applied, k)
	} else {
		s.applied[k] = ap
	}
	port, hasPort := s.hcPorts[k]
	switch {
	case sp.HealthCheckNodePort != 0:
		if port != sp.HealthCheckNodePort || s.localReady[k] != sp.LocalReadyEndpoints {
			s.hcPorts[k], s.localReady[k] = sp.HealthCheckNodePort, sp.LocalReadyEndpoints
			s.healthDirty = true
		}
	case hasPort:
		delete(s.hcPorts, k)
		delete(s.localReady, k)
		s.healthDirty = true
	}
}

// replace records a full sync's plans: every service.
func (s *syncState) replace(plans []policy.ServicePlan) {
	s.keepUDPOf(plans)
	clear(s.applied)
	clear(s.hcPorts)
	clear(s.localReady)
	s.totals = newTotals()
	for _, sp := range plans {
		s.set(sp)
	}
	s.healthDirty = true
}

// update records an incremental sync's plans and returns those whose
// virtual servers changed: the only ones the data plane needs.
func (s *syncState) update(plans []policy.ServicePlan) []policy.ServicePlan {
	var changes []policy.ServicePlan
	for _, sp := range plans {
		ap := s.summary(sp)
		if ap.digest != s.applied[sp.Service].digest {
			changes = append(changes, sp)
		}
		s.record(sp, ap)
	}
	return changes
}

// syncOnce is the runner's function: a sync, then when to sync again
// regardless of changes: at once after a failed incremental sync (the
// data plane asks for a full one), or when a failed service's retry is
// due.
func (p *Proxier) syncOnce(periodic bool) (time.Time, error) {
	before, due := p.Stats(), p.retryDue()
	err := p.sync(periodic)
	after := p.Stats()
	// Only a sync that called the data plane has new failures to report:
	// a full one, an Apply of changes, or an Apply for due retries.
	p.reportServiceFailures(due || after.Applies > before.Applies || after.FullSyncs > before.FullSyncs)
	now := p.clock.Now()
	if err != nil && !after.LastFull && p.dp.NeedsResync() {
		return now, err
	}
	at := p.dp.NextRetry()
	if !at.IsZero() && !at.After(now) {
		// The Apply just made retried what was due; a retry time still
		// past is the writer's slip: never spin on it.
		at = now.Add(backoff.Initial)
	}
	return at, err
}

// retryDue reports whether a failed service is due for its retry, which
// only Apply makes.
func (p *Proxier) retryDue() bool {
	at := p.dp.NextRetry()
	return !at.IsZero() && !at.After(p.clock.Now())
}

// sync is one sync. A periodic sync repairs the kernel
// against what was last programmed, in slices with the changes queued
// meanwhile applied between them (repair, when the data plane can);
// otherwise it is a full Resync of a freshly computed plan, as it is when
// none succeeded yet, after a failure or when the data plane asks. Any
// other sync recomputes the dirty services and applies only those whose
// virtual servers changed.
func (p *Proxier) sync(periodic bool) error {
	full := p.st.full || p.dp.NeedsResync()
	if periodic && !full {
		start := p.clock.Now()
		if err := p.dp.StartRepair(); !errors.Is(err, ErrNoRepair) {
			return p.repair(start, err)
		}
	}
	full = full || periodic
	if full {
		defer p.tightenGC(fullSyncGCPercent)()
	}
	start := p.clock.Now()
	p.obs.SyncStarted()
	p.changed.Store(false) // what is queued from now on asks again
	w := p.t.checkout(full, p.cfg.OnPlan != nil)
	p.obs.ServiceChanges(w.svcPending, 0)
	p.obs.EndpointChanges(w.epPending, 0)

	var changes []policy.ServicePlan
	var err error
	recomputed := len(w.plans)
	if full {
		p.st.replace(w.plans)
		w.plans = p.planEvents.warned(w.plans)
		plan := *w.plan
		if p.cfg.OnPlan == nil {
			// From here the writers alone hold the plan, each while it
			// reads it: its lists are garbage while the IPVS writer adds
			// the table, the cold start's busiest moment.
			*w.plan = policy.Plan{}
		}
		p.log.V(9).Info("Plan", "plan", plan)
		if err = p.dp.Resync(plan); err != nil {
			err = fmt.Errorf("resync %d virtual servers: %w", w.size.virtualServers, err)
		}
	} else if changes = p.st.update(w.plans); len(changes) > 0 || p.retryDue() {
		p.log.V(9).Info("Changes", "changes", changes)
		if err = p.dp.Apply(changes); err != nil {
			err = fmt.Errorf("apply %d services: %w", len(changes), err)
		}
	}
	p.st.full = err != nil
	p.st.failed = p.st.failed || err != nil
	p.st.lastEnd = p.clock.Now()
	elapsed := p.st.lastEnd.Sub(start)
	p.after(w, changes, err)
	p.obs.SyncDone(full, elapsed, err)
	p.countSync(full, changes, err)
	if err != nil {
		p.log.Error(err, "Sync failed; the next sync is a full resync", "full", full)
		return err
	}
	p.log.V(2).Info("Synced", "full", full, "recomputed", recomputed, "applied", len(changes),
		"pendingServices", w.svcPending, "elapsed", elapsed)
	p.reconcileConntrack()
	p.logMilestone(w, full, elapsed)
	if full {
		p.releaseMemory()
	}
	return nil
}

// resyncTimer is a data plane that reports how long each writer took in
// its last Resync (DataPlane).
type resyncTimer interface{ LastResync() ResyncTimes }

// logMilestone logs, at the default level, the first successful sync
// and the first one after failures, with what the node now programs: an
// operator sees at v=0 that the proxy works, and that it recovered. After
// a full sync it says how long each writer took, the rest of elapsed
// being mostly the plan's computation: where a cold start's first sync
// went.
func (p *Proxier) logMilestone(w work, full bool, elapsed time.Duration) {
	first, recovered := !p.st.synced, p.st.failed
	p.st.synced, p.st.failed = true, false
	if !first && !recovered {
		return
	}
	msg := "First sync done"
	if !first {
		msg = "Synced again after failures"
	}
	kv := []any{"services", len(p.st.applied), "elapsed", elapsed}
	if w.plan != nil {
		kv = append(kv, "virtualServers", w.size.virtualServers, "destinations", w.size.destinations)
	}
	if rt, ok := p.dp.(resyncTimer); ok && full {
		t := rt.LastResync()
		kv = append(kv, "nftables", t.NFTables, "ipvs", t.IPVS)
	}
	p.log.Info(msg, kv...)
}

// after reports a sync to health, the observer and OnPlan.
func (p *Proxier) after(w work, changes []policy.ServicePlan, err error) {
	if err == nil {
		p.health.Updated()
		p.reportLatency(w, changes)
	}
	p.syncServiceHealth()
	p.obs.VirtualServers(maps.Clone(p.st.totals.byKind))
	p.obs.NoLocalEndpoints(TrafficPolicyInternal, p.st.totals.noLocalInternal)
	p.obs.NoLocalEndpoints(TrafficPolicyExternal, p.st.totals.noLocalExternal)
	p.obs.IPVSOps(p.dp.IPVSOps())
	p.obs.Draining(p.dp.Draining())
	p.planEvents.services(p.log, w.plans)
	if w.plan != nil {
		p.planEvents.plan(p.log, w.conflicts)
		if p.cfg.OnPlan != nil {
			p.cfg.OnPlan(*w.plan)
		}
	}
}

// reportLatency reports the network programming latency of the endpoint
// changes this sync programmed: all of them for a full sync, those of
// the applied services otherwise (a change that altered no virtual
// server programmed nothing).
func (p *Proxier) reportLatency(w work, changes []policy.ServicePlan) {
	report := func(k policy.ServiceKey, times []time.Time) {
		for _, t := range times {
			d := p.clock.Since(t)
			p.obs.NetworkProgrammingLatency(d)
			p.log.V(4).Info("Network programming", "service", k.String(), "elapsed", d)
		}
	}
	if w.full {
		for k, times := range w.triggers {
			report(k, times)
		}
		return
	}
	for _, sp := range changes {
		report(sp.Service, w.triggers[sp.Service])
	}
}

// syncServiceHealth gives ServiceHealth the healthCheckNodePort services
// when they changed; after an error it tries again next sync.
func (p *Proxier) syncServiceHealth() {
	if !p.st.healthDirty {
		return
	}
	err1 := p.svcHealth.SyncServices(maps.Clone(p.st.hcPorts))
	if err1 != nil {
		p.log.Error(err1, "Cannot sync health check services")
	}
	err2 := p.svcHealth.SyncEndpoints(maps.Clone(p.st.localReady))
	if err2 != nil {
		p.log.Error(err2, "Cannot sync health check endpoints")
	}
	p.st.healthDirty = err1 != nil || err2 != nil
}

// countSync counts a sync in Stats.
func (p *Proxier) countSync(full bool, changes []policy.ServicePlan, err error) {
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	s := &p.stats
	s.Syncs++
	s.LastFull, s.LastError, s.LastChanged = full, err, nil
	if full {
		s.FullSyncs++
	} else if len(changes) > 0 {
		s.Applies++
		for _, sp := range changes {
			s.LastChanged = append(s.LastChanged, sp.Service)
		}
	}
	if err != nil {
		s.Failures++
	}
}
