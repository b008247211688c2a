package ipvs

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// setDesired replaces a service's planned virtual servers. It returns the
// keys whose desired state may have changed (the service's old and new
// keys), the dummy addresses they bind, and one error per virtual server
// the service cannot have (a *ServiceError): untranslatable, or claimed
// by another service first (the first claim keeps it).
func (w *Writer) setDesired(svc policy.ServiceKey, vss []policy.VirtualServer) (touched []Key, addrs []netip.Addr, errs []error) {
	for _, k := range w.owned[svc] {
		if x := w.want[k]; x != nil && x.binds() {
			addrs = append(addrs, k.Addr)
		}
		w.release(k)
		touched = append(touched, k)
	}
	delete(w.owned, svc)
	delete(w.desired, svc)
	if len(vss) == 0 {
		return touched, addrs, nil
	}
	w.desired[svc] = vss
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
			addrs = append(addrs, k.Addr)
		}
	}
	if len(keys) > 0 {
		w.owned[svc] = keys
	}
	return touched, addrs, errs
}

func (w *Writer) claim(k Key, x *wanted) {
	w.want[k] = x
	if x.binds() {
		w.addrRefs[k.Addr]++
	}
}

func (w *Writer) release(k Key) {
	x := w.want[k]
	if x == nil {
		return
	}
	delete(w.want, k)
	if x.binds() {
		decrement(w.addrRefs, k.Addr)
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
