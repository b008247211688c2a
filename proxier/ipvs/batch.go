package ipvs

import (
	"fmt"
	"net/netip"
	"slices"
	"syscall"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// phase orders a batch's steps: every add, then every update, then every
// prune, so a virtual server never loses its old destinations before it
// has its new ones.
type phase int

const (
	phaseAddAddress phase = iota // a VIP is bound before its virtual servers exist
	phaseAdd
	phaseUpdate
	phasePrune
	phasePruneAddress // and unbound after they are gone
	phases
)

// step is one kernel change (or a drain check, which may make one),
// planned by diffing the mirror against the desired state. Its run does
// at once what cannot wait (reads, addresses) and returns the IPVS
// change, if any, which the batch sends with the others of its phase in
// one Kernel.Write (send.go).
type step struct {
	phase phase
	key   Key                 // the virtual server; zero for address steps
	svcs  []policy.ServiceKey // blamed (retried with backoff) on failure
	run   func() (*change, error)
}

// batch collects the steps of one Apply or Resync and runs them.
type batch struct {
	w        *Writer
	now      time.Time
	steps    [phases][]step             // by phase, each in the order planned
	services map[policy.ServiceKey]bool // reconciled: a retry is cleared or scheduled
	blamed   map[policy.ServiceKey]bool
	vsDone   map[Key]bool
	addrDone map[netip.Addr]bool
	fresh    map[Key]bool // destinations re-read from the kernel in this batch
	errs     []error

	// Touched by the services of this batch, reconciled by plan once
	// every service's desired state is recorded.
	pendingVS   []Key
	vsBy        map[Key]policy.ServiceKey
	pendingAddr []netip.Addr
	addrBy      map[netip.Addr][]policy.ServiceKey
}

func (w *Writer) newBatch(now time.Time) *batch {
	return &batch{
		w: w, now: now,
		services: map[policy.ServiceKey]bool{}, blamed: map[policy.ServiceKey]bool{},
		vsDone: map[Key]bool{}, addrDone: map[netip.Addr]bool{}, fresh: map[Key]bool{},
		vsBy: map[Key]policy.ServiceKey{}, addrBy: map[netip.Addr][]policy.ServiceKey{},
	}
}

func (b *batch) add(s step) { b.steps[s.phase] = append(b.steps[s.phase], s) }

// expect makes room for n more steps of phase ph (a Resync knows how
// many adds its plan may need, and growing a large slice one append at a
// time is a large part of a cold Resync).
func (b *batch) expect(ph phase, n int) { b.steps[ph] = slices.Grow(b.steps[ph], n) }

func (b *batch) blame(svc policy.ServiceKey) {
	if svc == (policy.ServiceKey{}) {
		return
	}
	b.services[svc] = true
	b.blamed[svc] = true
}

// service records a service's new virtual servers and notes its old and
// new virtual servers and their addresses for plan.
func (b *batch) service(svc policy.ServiceKey, vss []policy.VirtualServer) {
	touched, addrs, errs := b.w.setDesired(svc, vss)
	b.reconcile(svc, touched, addrs, errs)
}

// retry reconciles a service whose last batch failed in the kernel: its
// virtual servers as last translated, and their addresses, again. A
// service with virtual servers it could not have is retried with service
// instead (Writer.desired), since what blocked them may be gone.
func (b *batch) retry(svc policy.ServiceKey) {
	if vss, ok := b.w.desired[svc]; ok {
		b.service(svc, vss)
		return
	}
	keys := slices.Clone(b.w.owned[svc])
	var addrs []netip.Addr
	for _, k := range keys {
		if x := b.w.want[k]; x != nil && x.binds() {
			addrs = append(addrs, k.Address)
		}
	}
	b.reconcile(svc, keys, addrs, nil)
}

// reconcile notes a service's touched virtual servers (and its stale
// ones) and their addresses for plan, and its errors.
func (b *batch) reconcile(svc policy.ServiceKey, touched []Key, addrs []netip.Addr, errs []error) {
	b.services[svc] = true
	var stale []Key
	for k, s := range b.w.stale {
		if s == svc {
			stale = append(stale, k)
		}
	}
	slices.SortFunc(stale, Key.Compare)
	touched = append(touched, stale...)
	if len(errs) > 0 {
		b.errs = append(b.errs, errs...) // *ServiceError: the service's alone
		b.blame(svc)
	}
	for _, k := range touched {
		if _, ok := b.vsBy[k]; !ok {
			b.pendingVS = append(b.pendingVS, k)
		}
		b.vsBy[k] = svc
	}
	for _, a := range addrs {
		if _, ok := b.addrBy[a]; !ok {
			b.pendingAddr = append(b.pendingAddr, a)
		}
		if !slices.Contains(b.addrBy[a], svc) {
			b.addrBy[a] = append(b.addrBy[a], svc)
		}
	}
}

// plan diffs what the batch's services touched. Their old virtual
// servers were ours, so those no longer planned are deleted.
func (b *batch) plan() {
	for _, k := range b.pendingVS {
		b.virtualServer(k, b.vsBy[k], true)
	}
	for _, a := range b.pendingAddr {
		b.address(a, b.addrBy[a]...)
	}
}

// virtualServer plans the changes that make one kernel virtual server
// match its desired state. Without a desired state it is deleted if
// mayDelete (it is ours) and it is not excluded.
func (b *batch) virtualServer(k Key, svc policy.ServiceKey, mayDelete bool) {
	if b.vsDone[k] {
		return
	}
	b.vsDone[k] = true
	w := b.w
	want, have := w.want[k], w.mirror[k]
	if want != nil {
		delete(w.stale, k)
	}
	switch {
	case want == nil && have == nil:
	case want == nil:
		if !mayDelete || w.excluded(k.Address) {
			delete(w.draining, k) // no longer ours to drain
			return
		}
		b.add(step{phase: phasePrune, key: k, svcs: svcs(svc), run: func() (*change, error) {
			return &change{op: Op{Kind: OpDeleteService, VS: VirtualServer{Key: k}}, done: func(err error) error {
				if err := gone(err, syscall.ESRCH); err != nil {
					if svc != (policy.ServiceKey{}) {
						w.stale[k] = svc // retried with the service
					}
					return fmt.Errorf("delete virtual server %s: %w", k, err)
				}
				delete(w.stale, k)
				delete(w.mirror, k)
				delete(w.draining, k)
				return nil
			}}, nil
		}})
	case have == nil:
		vs, n := want.vs, len(want.dests)
		b.add(step{phase: phaseAdd, key: k, svcs: svcs(want.svc), run: func() (*change, error) {
			return &change{op: Op{Kind: OpAddService, VS: vs}, done: func(err error) error {
				if err != nil {
					return fmt.Errorf("add virtual server %s: %w", k, err)
				}
				// Sized for the destinations that follow: one at a time,
				// they would grow it past that (BENCHMARKS.md, memory).
				w.mirror[k] = &actual{vs: vs, managed: true, dests: make(destList, 0, n)}
				return nil
			}}, nil
		}})
		for _, d := range want.dests {
			b.destination(phaseAdd, "add", want, d)
		}
	default:
		have.managed = true
		if have.vs != want.vs {
			vs := want.vs
			b.add(step{phase: phaseUpdate, key: k, svcs: svcs(want.svc), run: func() (*change, error) {
				return &change{op: Op{Kind: OpUpdateService, VS: vs}, done: func(err error) error {
					if err != nil {
						return fmt.Errorf("update virtual server %s: %w", k, err)
					}
					w.mirror[k].vs = vs
					return nil
				}}, nil
			}})
		}
		b.destinations(want, have)
	}
}

// destinations plans a kept virtual server's destination changes: new
// ones are added, changed weights updated (a draining destination that
// is back in the plan returns to its weight), and those no longer
// planned retired.
func (b *batch) destinations(want *wanted, have *actual) {
	k := want.vs.Key
	for _, d := range want.dests {
		b.w.forgetDrain(k, d.AddrPort())
		cur, ok := have.dests.get(d.AddrPort())
		switch {
		case !ok:
			b.destination(phaseAdd, "add", want, d)
		case cur.Weight != d.Weight || cur.Forward != ForwardMasq:
			b.destination(phaseUpdate, "update", want, d)
		}
	}
	var leaving []netip.AddrPort
	for _, d := range have.dests { // sorted
		if !want.dests.has(d.AddrPort()) {
			leaving = append(leaving, d.AddrPort())
		}
	}
	for _, d := range leaving {
		b.retire(k, want.svc, d)
	}
}

// destination plans adding or updating one planned destination.
func (b *batch) destination(ph phase, verb string, want *wanted, d Destination) {
	w, k, ap := b.w, want.vs.Key, d.AddrPort()
	kind := OpUpdateDestination
	if verb == "add" {
		kind = OpAddDestination
	}
	b.add(step{phase: ph, key: k, svcs: svcs(want.svc), run: func() (*change, error) {
		// Its virtual server may be added in the same Write: it is
		// looked up in the mirror once the kernel has answered.
		return &change{op: Op{Kind: kind, VS: VirtualServer{Key: k}, Dest: d}, done: func(err error) error {
			if err != nil {
				return fmt.Errorf("%s destination %s of virtual server %s: %w", verb, ap, k, err)
			}
			a := w.mirror[k]
			if a == nil {
				return fmt.Errorf("%s destination %s of virtual server %s: virtual server missing", verb, ap, k)
			}
			a.put(d)
			return nil
		}}, nil
	}})
}

// address plans adding a dummy address that a planned virtual server
// binds, or deleting one that none binds.
func (b *batch) address(a netip.Addr, by ...policy.ServiceKey) {
	if b.addrDone[a] {
		return
	}
	b.addrDone[a] = true
	w := b.w
	need := w.addrRefs[a] > 0
	p, has := w.bound[a]
	switch {
	case need && !has:
		p = hostPrefix(a)
		b.add(step{phase: phaseAddAddress, svcs: by, run: func() (*change, error) {
			if err := w.call("add-address", func() error { return w.links.AddAddr(w.cfg.Interface, p) }); err != nil {
				return nil, fmt.Errorf("add address %s to %s: %w", p, w.cfg.Interface, err)
			}
			w.bound[a] = p
			return nil, nil
		}})
	case !need && has:
		b.add(step{phase: phasePruneAddress, svcs: by, run: func() (*change, error) {
			if err := w.call("delete-address", func() error { return gone(w.links.DelAddr(w.cfg.Interface, p), syscall.EADDRNOTAVAIL) }); err != nil {
				return nil, fmt.Errorf("delete address %s from %s: %w", p, w.cfg.Interface, err)
			}
			delete(w.bound, a)
			return nil, nil
		}})
	}
}

// finish clears the retry of each reconciled service that succeeded and
// schedules one for each that failed.
func (b *batch) finish() {
	for svc := range b.services {
		if b.blamed[svc] {
			b.w.backoff(svc, b.now)
		} else {
			delete(b.w.failed, svc)
		}
	}
}

func svcs(svc policy.ServiceKey) []policy.ServiceKey {
	if svc == (policy.ServiceKey{}) {
		return nil
	}
	return []policy.ServiceKey{svc}
}

// schedulerFlags maps the plan's scheduler flags to IPVS service flag
// bits: the mh and sh schedulers read fallback from SCHED1 and port from
// SCHED2 (IP_VS_SVC_F_SCHED_{MH,SH}_{FALLBACK,PORT}).
var schedulerFlags = map[string]uint32{
	"mh-fallback": FlagSched1,
	"mh-port":     FlagSched2,
	"sh-fallback": FlagSched1,
	"sh-port":     FlagSched2,
}

// wanted is one planned virtual server in kernel form.
type wanted struct {
	svc   policy.ServiceKey
	bound bool // its address belongs on the dummy interface (policy.VirtualServer.Bound)
	vs    VirtualServer
	dests destList // NAT, with the plan's weights
}

// keyOf returns the kernel key of a planned virtual server.
func keyOf(vs *policy.VirtualServer) Key {
	return Key{Address: vs.Address.Unmap(), Protocol: vs.Protocol, Port: vs.Port}
}

// translate turns a planned virtual server into its kernel form: NAT
// destinations, the plan's scheduler and flags, and persistence.
func translate(svc policy.ServiceKey, vs *policy.VirtualServer) (*wanted, error) {
	k := keyOf(vs)
	if !k.Address.IsValid() {
		return nil, fmt.Errorf("virtual server %s: invalid address", k)
	}
	switch k.Protocol {
	case policy.ProtocolTCP, policy.ProtocolUDP, policy.ProtocolSCTP:
	default:
		return nil, fmt.Errorf("virtual server %s: unsupported protocol %q", k, k.Protocol)
	}
	if vs.Scheduler == "" {
		// policy defaults the scheduler (--ipvs-scheduler, then rr); a
		// plan without one is a bug, not something to decide here.
		return nil, fmt.Errorf("virtual server %s: the plan names no scheduler", k)
	}
	w := &wanted{svc: svc, bound: vs.Bound(), vs: VirtualServer{Key: k, Scheduler: vs.Scheduler}}
	for _, f := range vs.SchedulerFlags {
		bit, ok := schedulerFlags[f]
		if !ok {
			return nil, fmt.Errorf("virtual server %s: unknown scheduler flag %q", k, f)
		}
		w.vs.Flags |= bit
	}
	if vs.PersistenceTimeoutSeconds > 0 {
		w.vs.Flags |= FlagPersistent
		w.vs.Timeout = vs.PersistenceTimeoutSeconds
	}
	ds := make([]Destination, 0, len(vs.Destinations))
	for _, d := range vs.Destinations {
		a := d.Address.Unmap()
		if a.Is4() != k.Address.Is4() {
			return nil, fmt.Errorf("virtual server %s: destination %s of another family", k, netip.AddrPortFrom(a, d.Port))
		}
		ds = append(ds, Destination{Addr: a, Port: d.Port, Weight: d.Weight, Forward: ForwardMasq})
	}
	w.dests = newDestList(ds)
	return w, nil
}

// binds reports whether the virtual server's address belongs on the dummy
// interface: every kind but NodePort and an external address that is a
// node's, which sit on node addresses (policy decides).
func (w *wanted) binds() bool { return w.bound }

// hostPrefix is the /32 or /128 of an address.
func hostPrefix(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

// gracefulTermination reports whether a destination of this protocol is
// drained (weight 0 until its connections end) rather than deleted at
// once. UDP and SCTP are deleted at once, as kube-proxy does: IPVS drops
// their connections on the next packet (expire_nodest_conn).
func gracefulTermination(p policy.Protocol) bool { return p == policy.ProtocolTCP }

// setDesired replaces a service's planned virtual servers. It returns the
// keys whose desired state may have changed (the service's old and new
// keys), the dummy addresses they bind, and one error per virtual server
// the service cannot have (a *ServiceError): untranslatable, or claimed
// by another service first (the first claim keeps it).
func (w *Writer) setDesired(svc policy.ServiceKey, vss []policy.VirtualServer) (touched []Key, addrs []netip.Addr, errs []error) {
	for _, k := range w.owned[svc] {
		if x := w.want[k]; x != nil && x.binds() {
			addrs = append(addrs, k.Address)
		}
		w.release(k)
		touched = append(touched, k)
	}
	delete(w.owned, svc)
	delete(w.desired, svc)
	if len(vss) == 0 {
		return touched, addrs, nil
	}
	var keys []Key
	for i := range vss {
		x, err := translate(svc, &vss[i])
		if err != nil {
			errs = append(errs, serviceError(svc, ReasonInvalid, fmt.Errorf("service %s: %w", svc, err)))
			continue
		}
		k := x.vs.Key
		if o := w.want[k]; o != nil {
			if o.svc == svc {
				errs = append(errs, serviceError(svc, ReasonInvalid, fmt.Errorf("virtual server %s: listed twice by service %s", k, svc)))
			} else {
				errs = append(errs, serviceError(svc, ReasonConflict,
					fmt.Errorf("virtual server %s of service %s: already claimed by service %s", k, svc, o.svc)))
			}
			continue
		}
		w.claim(k, x)
		keys = append(keys, k)
		touched = append(touched, k)
		if x.binds() {
			addrs = append(addrs, k.Address)
		}
	}
	if len(keys) > 0 {
		w.owned[svc] = keys
	}
	if len(errs) > 0 {
		w.desired[svc] = vss // retried whole (batch.retry)
	}
	return touched, addrs, errs
}

func (w *Writer) claim(k Key, x *wanted) {
	w.want[k] = x
	if x.binds() {
		w.addrRefs[k.Address]++
	}
}

func (w *Writer) release(k Key) {
	x := w.want[k]
	if x == nil {
		return
	}
	delete(w.want, k)
	if x.binds() {
		decrement(w.addrRefs, k.Address)
	}
}

func decrement[K comparable](m map[K]int, k K) {
	if m[k] <= 1 {
		delete(m, k)
		return
	}
	m[k]--
}

// backoff schedules a failed service's retry: 1 s after its first
// failure, doubling with each further one, at most 2 min.
func (w *Writer) backoff(svc policy.ServiceKey, now time.Time) {
	r := w.failed[svc]
	if r == nil {
		r = &retry{delay: retryInitial}
		w.failed[svc] = r
	} else {
		r.delay = min(2*r.delay, retryMax)
	}
	r.at = now.Add(r.delay)
}

func (w *Writer) setDrain(k Key, d netip.AddrPort, since time.Time) {
	m := w.draining[k]
	if m == nil {
		m = map[netip.AddrPort]time.Time{}
		w.draining[k] = m
	}
	m[d] = since
}

func (w *Writer) forgetDrain(k Key, d netip.AddrPort) {
	m := w.draining[k]
	delete(m, d)
	if len(m) == 0 {
		delete(w.draining, k)
	}
}
