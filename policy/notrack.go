package policy

import (
	"fmt"
	"net/netip"
	"slices"
)

// NOTRACK across services. NOTRACK is keyed on the destination for the
// replies (nft's notrack-endpoints), so a destination that a NOTRACK
// service shares with a tracked one would have the tracked service's
// replies untracked, and its pods' TCP connections fail. The rule: a
// NOTRACK service is served tracked (NOTRACK refused, with a warning)
// when one of its endpoints is also an endpoint of a tracked service, in
// any namespace, directly or through other NOTRACK services sharing
// endpoints with it (they all stay NOTRACK, or none does). Tracked are
// the services served without NOTRACK and those the proxy does not serve
// (unmanaged.go: another proxy's, headless, invalid), whose traffic
// someone tracks. It is refused too when one of those endpoints is a
// node's address (the kubelet's port, a host-network pod): the node's
// own replies would go untracked. Endpoints are taken from the slices (address, protocol, slice port), ready or not: a
// superset of the destinations, so that refusing errs towards tracking,
// which is always correct.
//
// The index is kept only while some service is NOTRACK: a cluster without
// one pays nothing.

// noTrackIndex maps endpoint keys to the services whose slices list them.
type noTrackIndex struct {
	active    bool
	users     map[destinationKey][]ServiceKey // one entry per listing slice
	sliceKeys map[sliceID][]destinationKey
}

// setNoTrackCount records the number of NOTRACK services, building the
// index when the first appears and dropping it when the last goes.
func (e *Engine) setNoTrackCount(n int) {
	e.noTrackServices = n
	switch {
	case n > 0 && !e.nt.active:
		e.nt = noTrackIndex{active: true, users: map[destinationKey][]ServiceKey{}, sliceKeys: map[sliceID][]destinationKey{}}
		for svc, list := range e.slices {
			for _, s := range list {
				e.indexSlice(sliceID{svc.Namespace, s.Name}, svc, sliceEndpointKeys(s))
			}
		}
	case n == 0 && e.nt.active:
		e.nt = noTrackIndex{}
	}
}

// sliceEndpointKeys lists a slice's endpoints as NOTRACK matches them.
func sliceEndpointKeys(s *EndpointSlice) []destinationKey {
	out := make([]destinationKey, 0, len(s.Endpoints)*len(s.Ports))
	for i := range s.Endpoints {
		for _, p := range s.Ports {
			out = append(out, destinationKey{s.Endpoints[i].Address, p.Protocol, p.Port})
		}
	}
	return out
}

// indexSlice replaces a slice's keys (nil: the slice is gone) and returns
// the keys it had and has.
func (e *Engine) indexSlice(id sliceID, svc ServiceKey, keys []destinationKey) []destinationKey {
	old := e.nt.sliceKeys[id]
	for _, k := range old {
		list := e.nt.users[k]
		if i := slices.Index(list, svc); i >= 0 {
			list = slices.Delete(list, i, i+1)
		}
		if len(list) == 0 {
			delete(e.nt.users, k)
		} else {
			e.nt.users[k] = list
		}
	}
	for _, k := range keys {
		e.nt.users[k] = append(e.nt.users[k], svc)
	}
	if len(keys) == 0 {
		delete(e.nt.sliceKeys, id)
	} else {
		e.nt.sliceKeys[id] = keys
	}
	return append(old, keys...)
}

// noTrackSliceChanged updates the index for a slice of svc (nil s: gone)
// and returns the NOTRACK services whose refusal may have changed.
func (e *Engine) noTrackSliceChanged(id sliceID, svc ServiceKey, s *EndpointSlice) []ServiceKey {
	if !e.nt.active {
		return nil
	}
	var keys []destinationKey
	if s != nil {
		keys = sliceEndpointKeys(s)
	}
	changed := e.indexSlice(id, svc, keys)
	start := []ServiceKey{svc}
	for _, k := range changed {
		start = append(start, e.nt.users[k]...)
	}
	return e.noTrackReachable(start)
}

// noTrackReachable returns the NOTRACK services reachable from start
// through shared endpoints and NOTRACK services: those whose refusal a
// change of start may change.
func (e *Engine) noTrackReachable(start []ServiceKey) []ServiceKey {
	if !e.nt.active {
		return nil
	}
	var out []ServiceKey
	e.walkNoTrack(start, func(n ServiceKey) { out = append(out, n) }, nil)
	return out
}

// walkNoTrack visits, breadth first, the services sharing endpoints with
// those of start, walking on through NOTRACK services only: visit is
// called for each known NOTRACK service reached (start included), and
// refuse (when not nil) for the first endpoint of a NOTRACK service that
// NOTRACK must not touch, which ends the walk: one that is a node's
// address (the kubelet's port, say), or one that a tracked service
// shares (by), whether this proxy serves it or not (another proxy's,
// one skipped as invalid, a headless one).
func (e *Engine) walkNoTrack(start []ServiceKey, visit func(ServiceKey), refuse func(through ServiceKey, dest destinationKey, by ServiceKey)) {
	seen := map[ServiceKey]bool{}
	queue := slices.Clone(start)
	for i := 0; i < len(queue); i++ {
		x := queue[i]
		if seen[x] {
			continue
		}
		seen[x] = true
		noTrack := e.isNoTrack(x)
		if noTrack {
			visit(x)
		} else if i >= len(start) {
			continue
		}
		for _, s := range e.slices[x] {
			for _, k := range e.nt.sliceKeys[sliceID{x.Namespace, s.Name}] {
				if noTrack && refuse != nil && e.isNodeEndpoint(k.addr) {
					refuse(x, k, ServiceKey{})
					return
				}
				for _, u := range e.nt.users[k] {
					if u == x || seen[u] {
						continue
					}
					if noTrack && refuse != nil && e.isTracked(u) {
						refuse(x, k, u)
						return
					}
					queue = append(queue, u)
				}
			}
		}
	}
}

// isNoTrack reports whether a known service is configured NOTRACK.
func (e *Engine) isNoTrack(k ServiceKey) bool {
	entry, ok := e.services[k]
	return ok && entry.settings.noTrack
}

// isTracked reports whether k's endpoints are tracked: a known service
// served tracked, or one the proxy does not serve.
func (e *Engine) isTracked(k ServiceKey) bool {
	if entry, ok := e.services[k]; ok {
		return !entry.settings.noTrack
	}
	return e.isUnmanaged(k)
}

// isNodeEndpoint reports whether an endpoint address is a node's: a
// Node's InternalIP or ExternalIP, or this host's.
func (e *Engine) isNodeEndpoint(a netip.Addr) bool { return e.isNodeAddress(a) || e.isLocalAddress(a) }

// noTrackKeys lists the NOTRACK services while the index is
// active: a node address change may change their refusal.
func (e *Engine) noTrackKeys() []ServiceKey {
	if !e.nt.active {
		return nil
	}
	var out []ServiceKey
	for k, entry := range e.services {
		if entry.settings.noTrack {
			out = append(out, k)
		}
	}
	return out
}

// noTrackRefused reports whether a NOTRACK service must be served
// tracked, with the warning that says why: it names the endpoint, and
// the NOTRACK Service it came through when that is another one sharing
// endpoints with this one.
func (e *Engine) noTrackRefused(key ServiceKey) (Warning, bool) {
	if !e.nt.active {
		return Warning{}, false
	}
	var w Warning
	refused := false
	e.walkNoTrack([]ServiceKey{key}, func(ServiceKey) {}, func(through ServiceKey, d destinationKey, by ServiceKey) {
		refused = true
		dest := netip.AddrPortFrom(d.addr, d.port).String() + "/" + string(d.proto)
		what := "endpoint " + dest + " of this Service"
		if through != key {
			what = fmt.Sprintf("endpoint %s of NOTRACK Service %s, which shares endpoints with this one,", dest, through)
		}
		why := fmt.Sprintf("is also an endpoint of tracked Service %s", by)
		switch {
		case by == ServiceKey{}:
			why = "is a node's address"
		case !e.isKnown(by):
			why = fmt.Sprintf("is also an endpoint of Service %s, which this proxy does not serve (another proxy's, headless or invalid) and whose traffic is tracked", by)
		}
		w = Warning{Object: "Service " + key.String(), Field: "metadata.annotations[" + AnnotationNoTrack + "]",
			Reason: ReasonNoTrackRefused, Service: key,
			Message: fmt.Sprintf("%s %s: NOTRACK is not applied (a connection tracked one way only breaks TCP); this Service's traffic stays tracked",
				what, why)}
	})
	return w, refused
}

func (e *Engine) isKnown(k ServiceKey) bool {
	_, ok := e.services[k]
	return ok
}
