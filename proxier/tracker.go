package proxier

import (
	"errors"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/apiconv"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// tracker owns the policy engine and records which services changed since
// the last sync. Informer handlers write it; the sync checks the changes
// out. One mutex guards everything, since the engine is not safe for
// concurrent use.
//
// An event marks only the services it may affect. An invalid object is
// logged and ignored, so the previous valid version stays; a Service this
// proxy does not serve (ErrNotProxied) is removed. Either is recorded in
// the engine as unmanaged when not served (its ClusterIPs still held,
// its endpoints tracked: policy/unmanaged.go).
type tracker struct {
	mu       sync.Mutex
	engine   *policy.Engine
	nodeName string
	conv     serviceConv // how Services are converted
	logger   klog.Logger
	// since: trigger times older than this (objects already there at
	// start) are not network programming latency.
	since time.Time

	services   map[policy.ServiceKey]struct{} // in the engine
	dirty      map[policy.ServiceKey]struct{}
	all        bool // this node changed: every service is dirty
	svcPending map[policy.ServiceKey]struct{}
	epPending  map[policy.ServiceKey]struct{}
	triggers   map[policy.ServiceKey][]time.Time

	topo   map[policy.ServiceKey]struct{} // services annotated with topology keys
	self   *policy.Node
	others map[string]map[string]string // other nodes' labels, from the metadata informer
	// nodeGen counts metadata informer starts and stops; events from an
	// earlier informer are dropped.
	nodeGen                   int
	nodesRunning, nodesSynced bool
}

func newTracker(engine *policy.Engine, nodeName string, conv serviceConv, since time.Time) *tracker {
	return &tracker{
		engine: engine, nodeName: nodeName, conv: conv, logger: klog.Background(), since: since,
		services: map[policy.ServiceKey]struct{}{}, dirty: map[policy.ServiceKey]struct{}{},
		svcPending: map[policy.ServiceKey]struct{}{}, epPending: map[policy.ServiceKey]struct{}{},
		triggers: map[policy.ServiceKey][]time.Time{}, topo: map[policy.ServiceKey]struct{}{},
		others: map[string]map[string]string{},
	}
}

// change is what one event did, reported by the caller outside the lock.
type change struct {
	dirty                 bool // some service must be recomputed
	svcChange, epChange   bool // counted as a Service / EndpointSlice change
	svcPending, epPending int
	topology              bool // some service uses topology keys
	warnings              []policy.Warning
	invalid               bool // the object was ignored
}

func (t *tracker) resultLocked(c change) change {
	c.svcPending, c.epPending, c.topology = len(t.svcPending), len(t.epPending), len(t.topo) > 0
	return c
}

func serviceKey(namespace, name string) policy.ServiceKey {
	return policy.ServiceKey{Namespace: namespace, Name: name}
}

// applyService applies a converted Service add or update.
func (t *tracker) applyService(svc *convertedService) change {
	key := serviceKey(svc.namespace, svc.name)
	ps, err := svc.conv, svc.err
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case errors.Is(err, policy.ErrNotProxied):
		t.logger.V(4).Info("Service not proxied", "service", klog.KObj(svc), "reason", err.Error())
		c := t.removeServiceLocked(key)
		return t.setUnmanagedLocked(key, svc.held, c)
	case err != nil:
		t.logger.Error(err, "Ignoring invalid object; its previous version stays", "service", klog.KObj(svc))
		c := t.resultLocked(change{invalid: true})
		if _, served := t.services[key]; !served { // no previous version: it still holds its ClusterIPs
			c = t.setUnmanagedLocked(key, svc.held, c)
		}
		return c
	}
	ws := t.engine.UpsertService(ps)
	t.services[key] = struct{}{}
	if _, ok := ps.Annotations[policy.AnnotationTopologyKeys]; ok {
		t.topo[key] = struct{}{}
	} else {
		delete(t.topo, key)
	}
	t.logger.V(4).Info("Service updated", "service", klog.KObj(svc), "warnings", len(ws))
	t.markLocked(key, t.svcPending)
	t.markReassignedLocked()
	return t.resultLocked(change{dirty: true, svcChange: true, warnings: ws})
}

// deleteService applies a Service delete.
func (t *tracker) deleteService(namespace, name string) change {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.logger.V(4).Info("Service deleted", "service", klog.KRef(namespace, name))
	key := serviceKey(namespace, name)
	c := t.removeServiceLocked(key)
	t.engine.DeleteUnmanagedService(key)
	return t.markUnmanagedLocked(c)
}

// setUnmanagedLocked records a Service the proxy does not serve (another
// proxy's, headless, invalid), with the ClusterIPs it holds: the engine
// keeps them from other Services' external IPs, and NOTRACK from its
// endpoints. The services that changes are marked.
func (t *tracker) setUnmanagedLocked(key policy.ServiceKey, held []netip.Addr, c change) change {
	t.engine.SetUnmanagedService(key, held)
	return t.markUnmanagedLocked(c)
}

func (t *tracker) markUnmanagedLocked(c change) change {
	marked := t.engine.Reassigned()
	for _, k := range marked {
		t.markLocked(k, nil)
	}
	c.dirty = c.dirty || len(marked) > 0
	return t.resultLocked(c)
}

func (t *tracker) removeServiceLocked(key policy.ServiceKey) change {
	if _, ok := t.services[key]; !ok {
		return t.resultLocked(change{})
	}
	delete(t.services, key)
	delete(t.topo, key)
	t.engine.DeleteService(key)
	t.markLocked(key, t.svcPending)
	t.markReassignedLocked()
	return t.resultLocked(change{dirty: true, svcChange: true})
}

// markReassignedLocked marks the services whose ownership of a virtual
// server the last engine change moved (a released ClusterIP, an external
// IP taken by an older claimant), so that the same sync programs them:
// release and claim land in one batch.
func (t *tracker) markReassignedLocked() {
	for _, k := range t.engine.Reassigned() {
		t.markLocked(k, nil)
	}
}

func (t *tracker) markLocked(key policy.ServiceKey, pending map[policy.ServiceKey]struct{}) {
	t.dirty[key] = struct{}{}
	if pending != nil {
		pending[key] = struct{}{}
	}
}

// applySlice applies a converted EndpointSlice add or update, and records
// its trigger time.
func (t *tracker) applySlice(s *convertedSlice) change {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s.err != nil {
		t.logger.Error(s.err, "Ignoring invalid object; its previous version stays", "endpointSlice", klog.KObj(s))
		return t.resultLocked(change{})
	}
	var affected []policy.ServiceKey
	if s.conv == nil { // no longer one the engine uses
		affected = t.engine.DeleteEndpointSlice(s.namespace, s.name)
	} else {
		affected = t.engine.UpsertEndpointSlice(s.conv)
		if tt, ok := t.triggerTime(s); ok {
			t.triggers[s.conv.Service] = append(t.triggers[s.conv.Service], tt)
		}
	}
	t.logger.V(4).Info("EndpointSlice updated", "endpointSlice", klog.KObj(s), "services", affected)
	return t.markSlicesLocked(affected)
}

// deleteSlice applies an EndpointSlice delete. As kube-proxy, pending
// trigger times of its service are dropped: a deletion's trigger time is
// not the time of the change being programmed.
func (t *tracker) deleteSlice(namespace, name string) change {
	t.mu.Lock()
	defer t.mu.Unlock()
	affected := t.engine.DeleteEndpointSlice(namespace, name)
	for _, k := range affected {
		delete(t.triggers, k)
	}
	t.logger.V(4).Info("EndpointSlice deleted", "endpointSlice", klog.KRef(namespace, name), "services", affected)
	return t.markSlicesLocked(affected)
}

// markSlicesLocked marks the served services among affected: a slice of
// a Service not served (another proxy's, headless) changes no plan but
// those of the NOTRACK services sharing its endpoints, among affected.
func (t *tracker) markSlicesLocked(affected []policy.ServiceKey) change {
	n := 0
	for _, k := range affected {
		if _, served := t.services[k]; served {
			t.markLocked(k, t.epPending)
			n++
		}
	}
	return t.resultLocked(change{dirty: n > 0, epChange: n > 0})
}

// triggerTime returns the slice's endpoints.kubernetes.io/last-change-trigger-time
// if it is later than since.
func (t *tracker) triggerTime(s *convertedSlice) (time.Time, bool) {
	if s.bad != nil {
		t.logger.V(2).Info("Ignoring unparsable trigger time", "endpointSlice", klog.KObj(s), "value", s.bad.value, "err", s.bad.err)
		return time.Time{}, false
	}
	if s.trigger == 0 {
		return time.Time{}, false
	}
	tt := time.Unix(0, s.trigger)
	return tt, tt.After(t.since)
}

// upsertSelf applies this node's Node. Addresses, labels (the zone) and
// so every service may change; a Node whose converted form is unchanged
// (a heartbeat) marks nothing.
func (t *tracker) upsertSelf(n *corev1.Node) change {
	if n.Name != t.nodeName {
		return change{}
	}
	conv, ws, err := apiconv.Node(n)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		t.logger.Error(err, "Ignoring invalid object; its previous version stays", "node", klog.KObj(n))
		return t.resultLocked(change{})
	}
	if reflect.DeepEqual(conv, t.self) {
		return t.resultLocked(change{})
	}
	for _, w := range ws { // logged when the Node changes, not on every heartbeat
		t.logger.Info("Skipping a Node address", "node", klog.KObj(n), "warning", w.String())
	}
	t.engine.UpsertNode(conv)
	t.engine.Reassigned() // every service is marked
	t.self, t.all = conv, true
	t.logger.V(4).Info("This node updated", "node", klog.KObj(n))
	return t.resultLocked(change{dirty: true})
}

// setHostAddresses applies the host's interface addresses: the NodePort
// addresses and node addresses may change, and so every service.
func (t *tracker) setHostAddresses(addrs []netip.Addr) change {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.engine.SetLocalAddresses(addrs) {
		return t.resultLocked(change{})
	}
	t.engine.Reassigned() // every service is marked
	t.all = true
	t.logger.V(2).Info("Host addresses changed", "addresses", addrs)
	return t.resultLocked(change{dirty: true})
}

// deleteSelf applies the deletion of this node's Node.
func (t *tracker) deleteSelf(name string) change {
	if name != t.nodeName {
		return change{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.engine.DeleteNode(name)
	t.engine.Reassigned() // every service is marked
	t.self, t.all = nil, true
	t.logger.V(4).Info("This node deleted", "node", klog.KRef("", name))
	return t.resultLocked(change{dirty: true})
}

// setNodeAddresses applies another node's InternalIP and ExternalIP
// addresses (nil: the Node is gone). Only the services listing an
// address that became or stopped being a node's are marked; a Node
// update that leaves the addresses alone (a status report) marks none.
func (t *tracker) setNodeAddresses(name string, addrs []netip.Addr) change {
	if name == t.nodeName {
		return change{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.engine.SetNodeAddresses(name, addrs) {
		return t.resultLocked(change{})
	}
	marked := t.engine.Reassigned()
	for _, k := range marked {
		t.markLocked(k, nil)
	}
	t.logger.V(4).Info("Node addresses changed", "node", klog.KRef("", name), "addresses", addrs, "services", len(marked))
	return t.resultLocked(change{dirty: len(marked) > 0})
}

// upsertOther records another node's labels, from metadata informer
// generation gen. Services with topology keys are marked.
func (t *tracker) upsertOther(gen int, name string, labels map[string]string) change {
	t.mu.Lock()
	defer t.mu.Unlock()
	if gen != t.nodeGen || name == t.nodeName {
		return t.resultLocked(change{})
	}
	if old, ok := t.others[name]; ok && maps.Equal(old, labels) {
		return t.resultLocked(change{})
	}
	t.others[name] = labels
	t.engine.SetNodeLabels(name, labels)
	t.markReassignedLocked()
	return t.markTopologyLocked()
}

// deleteOther forgets another node.
func (t *tracker) deleteOther(gen int, name string) change {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.others[name]; gen != t.nodeGen || !ok {
		return t.resultLocked(change{})
	}
	delete(t.others, name)
	t.engine.SetNodeLabels(name, nil)
	t.markReassignedLocked()
	return t.markTopologyLocked()
}

func (t *tracker) markTopologyLocked() change {
	for k := range t.topo {
		t.markLocked(k, nil)
	}
	return t.resultLocked(change{dirty: len(t.topo) > 0})
}

// nodesStarted begins a metadata informer generation.
func (t *tracker) nodesStarted() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.nodeGen++
	t.nodesRunning, t.nodesSynced = true, false
	return t.nodeGen
}

// nodesSyncedGen records that generation gen listed every node; services
// with topology keys, held back until then, are marked.
func (t *tracker) nodesSyncedGen(gen int) change {
	t.mu.Lock()
	defer t.mu.Unlock()
	if gen != t.nodeGen || !t.nodesRunning {
		return t.resultLocked(change{})
	}
	t.nodesSynced = true
	return t.markTopologyLocked()
}

// nodesStopped ends the metadata informer generation and forgets other
// nodes' labels: a later informer lists them again, and deletions in
// between would be missed.
func (t *tracker) nodesStopped() change {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.nodeGen++
	t.nodesRunning, t.nodesSynced = false, false
	for name := range t.others {
		t.engine.SetNodeLabels(name, nil) // their addresses stay: another watch feeds them
	}
	clear(t.others)
	return t.markTopologyLocked()
}

// heldLocked reports whether a dirty service waits for the metadata informer.
func (t *tracker) heldLocked(k policy.ServiceKey) bool {
	_, topo := t.topo[k]
	return topo && t.nodesRunning && !t.nodesSynced
}

// work is what one sync takes from the tracker.
type work struct {
	full bool
	// plan is the whole plan: for a full sync, or when wanted.
	plan      *policy.Plan
	conflicts []policy.Warning
	// plans are the recomputed services, sorted: every service for a
	// full sync, the dirty ones otherwise (empty for removed services).
	plans    []policy.ServicePlan
	triggers map[policy.ServiceKey][]time.Time
	// Changes still pending after this checkout (held back).
	svcPending, epPending int
	// size is plan's, counted at checkout: a full sync drops the plan
	// once the writers have it (Proxier.sync).
	size planSize
}

// planSize counts a plan's virtual servers and destinations.
type planSize struct{ virtualServers, destinations int }

func sizeOf(plan *policy.Plan) planSize {
	n := planSize{virtualServers: len(plan.VirtualServers)}
	for i := range plan.VirtualServers {
		n.destinations += len(plan.VirtualServers[i].Destinations)
	}
	return n
}

// checkout takes the changes and computes the plans the sync needs.
// Services with topology keys stay pending while the node metadata
// informer has not listed every node.
func (t *tracker) checkout(full, wantPlan bool) work {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := work{full: full, triggers: map[policy.ServiceKey][]time.Time{}}
	var keys []policy.ServiceKey
	if !full {
		keys = t.dirtyKeysLocked()
	}
	// Held services dropped from an all-services mark are marked again
	// when the node informer syncs.
	t.all = false
	for k := range t.dirty {
		if full || !t.heldLocked(k) {
			t.take(k, w.triggers)
		}
	}
	if full {
		// Every service, computed once: the plans and the node's Plan.
		w.plans = t.engine.ComputeAll()
		plan, ws := t.engine.Assemble(w.plans)
		w.plan, w.conflicts, w.size = &plan, ws, sizeOf(&plan)
	} else {
		w.plans = make([]policy.ServicePlan, 0, len(keys))
		for _, k := range keys {
			sp, _ := t.engine.ComputeService(k)
			w.plans = append(w.plans, sp)
		}
		if wantPlan { // --dry-run prints the whole plan after each sync
			plan, ws := t.engine.Compute()
			w.plan, w.conflicts, w.size = &plan, ws, sizeOf(&plan)
		}
	}
	w.svcPending, w.epPending = len(t.svcPending), len(t.epPending)
	t.dirty, t.svcPending, t.epPending = emptied(t.dirty), emptied(t.svcPending), emptied(t.epPending)
	t.triggers = emptied(t.triggers)
	return w
}

// emptied returns m, or a new map when m is empty: a map keeps the room
// it grew to, and the start marks every service (an entry's room per
// service in each of these maps, held for the process's life;
// benchmarks/NOTES.md, memory).
func emptied[K comparable, V any](m map[K]V) map[K]V {
	if len(m) == 0 {
		return map[K]V{}
	}
	return m
}

// dirtyKeysLocked lists, sorted, the services an incremental sync
// recomputes: every service after an all-services mark (this node
// changed), else the dirty ones; held services wait.
func (t *tracker) dirtyKeysLocked() []policy.ServiceKey {
	var keys []policy.ServiceKey
	if t.all {
		keys = t.engine.Services()
	}
	for k := range t.dirty {
		if _, ok := t.services[k]; !ok || !t.all { // removed, or not listed yet
			keys = append(keys, k)
		}
	}
	keys = slices.DeleteFunc(keys, t.heldLocked)
	slices.SortFunc(keys, policy.ServiceKey.Compare)
	return keys
}

// take checks one dirty service out.
func (t *tracker) take(k policy.ServiceKey, triggers map[policy.ServiceKey][]time.Time) {
	if tt := t.triggers[k]; len(tt) > 0 {
		triggers[k] = tt
	}
	delete(t.triggers, k)
	delete(t.dirty, k)
	delete(t.svcPending, k)
	delete(t.epPending, k)
}
