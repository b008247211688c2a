package ipvs

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/backoff"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// The Writer's desired state: each planned virtual server translated
// into kernel form (desiredVS), which service claims it and which addresses
// it binds, each failed service's retry time, and the destinations
// draining after they left the plan. A batch diffs this against the
// mirror of the kernel (batch.go).

// schedulerFlags maps the plan's scheduler flags to IPVS service flag
// bits: the mh and sh schedulers read fallback from SCHED1 and port from
// SCHED2 (IP_VS_SVC_F_SCHED_{MH,SH}_{FALLBACK,PORT}).
var schedulerFlags = map[string]uint32{
	"mh-fallback": FlagSched1,
	"mh-port":     FlagSched2,
	"sh-fallback": FlagSched1,
	"sh-port":     FlagSched2,
}

// desiredVS is one planned virtual server in kernel form.
type desiredVS struct {
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
func translate(svc policy.ServiceKey, vs *policy.VirtualServer) (*desiredVS, error) {
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
	w := &desiredVS{svc: svc, bound: vs.Bound(), vs: VirtualServer{Key: k, Scheduler: vs.Scheduler}}
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
func (w *desiredVS) binds() bool { return w.bound }

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
	for _, k := range w.claimed[svc] {
		if x := w.desired[k]; x != nil && x.binds() {
			addrs = append(addrs, k.Address)
		}
		w.release(k)
		touched = append(touched, k)
	}
	delete(w.claimed, svc)
	delete(w.retryPlans, svc)
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
		if o := w.desired[k]; o != nil {
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
		w.claimed[svc] = keys
	}
	if len(errs) > 0 {
		// Retried whole (batch.retry); a copy, as vss may be a whole
		// plan's group, whose buffer the next service reuses
		// (policy.Plan.Services).
		w.retryPlans[svc] = slices.Clone(vss)
	}
	return touched, addrs, errs
}

func (d *desiredState) claim(k Key, x *desiredVS) {
	d.desired[k] = x
	if x.binds() {
		d.addrRefs[k.Address]++
	}
}

func (d *desiredState) release(k Key) {
	x := d.desired[k]
	if x == nil {
		return
	}
	delete(d.desired, k)
	if x.binds() {
		decrement(d.addrRefs, k.Address)
	}
}

func decrement[K comparable](m map[K]int, k K) {
	if m[k] <= 1 {
		delete(m, k)
		return
	}
	m[k]--
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

// retrySchedule is the failed services' backoff: each one's consecutive
// failures and when it is retried.
type retrySchedule struct {
	failed map[policy.ServiceKey]*retry
}

// retry is a failed service's backoff.
type retry struct {
	failures int
	at       time.Time
}

func newRetrySchedule() retrySchedule { return retrySchedule{failed: map[policy.ServiceKey]*retry{}} }

// failedAt schedules svc's retry after a failure at now: backoff.Initial
// after its first failure, doubling with each further one, at most
// backoff.ServiceMax.
func (r *retrySchedule) failedAt(svc policy.ServiceKey, now time.Time) {
	x := r.failed[svc]
	if x == nil {
		x = &retry{}
		r.failed[svc] = x
	}
	x.failures++
	x.at = now.Add(backoff.Delay(x.failures, backoff.Initial, backoff.ServiceMax))
}

// succeeded clears svc's backoff.
func (r *retrySchedule) succeeded(svc policy.ServiceKey) { delete(r.failed, svc) }

// due returns the failed services whose retry is due at now, sorted.
func (r *retrySchedule) due(now time.Time) []policy.ServiceKey {
	var out []policy.ServiceKey
	for _, svc := range r.services() {
		if !now.Before(r.failed[svc].at) {
			out = append(out, svc)
		}
	}
	return out
}

// services returns the failed services, sorted.
func (r *retrySchedule) services() []policy.ServiceKey {
	return slices.SortedFunc(maps.Keys(r.failed), policy.ServiceKey.Compare)
}

// next returns the earliest retry; zero when none failed.
func (r *retrySchedule) next() time.Time {
	var next time.Time
	for _, x := range r.failed {
		if next.IsZero() || x.at.Before(next) {
			next = x.at
		}
	}
	return next
}
