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
// endpoints with it (they all stay NOTRACK, or none does). Endpoints are
// taken from the slices (address, protocol, slice port), ready or not: a
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
// tracked (when not nil) for the first known tracked service found
// sharing an endpoint with a NOTRACK one, which ends the walk.
func (e *Engine) walkNoTrack(start []ServiceKey, visit func(ServiceKey), tracked func(dest destinationKey, svc ServiceKey)) {
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
				for _, u := range e.nt.users[k] {
					if u == x || seen[u] {
						continue
					}
					if _, known := e.services[u]; known && noTrack && !e.isNoTrack(u) && tracked != nil {
						tracked(k, u)
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

// noTrackRefused reports whether a NOTRACK service must be served
// tracked, with the warning that says why.
func (e *Engine) noTrackRefused(key ServiceKey) (Warning, bool) {
	if !e.nt.active {
		return Warning{}, false
	}
	var w Warning
	refused := false
	e.walkNoTrack([]ServiceKey{key}, func(ServiceKey) {}, func(d destinationKey, t ServiceKey) {
		refused = true
		dest := netip.AddrPortFrom(d.addr, d.port).String() + "/" + string(d.proto)
		w = Warning{Object: "Service " + key.String(), Field: "metadata.annotations[" + AnnotationNoTrack + "]",
			Reason: ReasonNoTrackRefused, Service: key,
			Message: fmt.Sprintf("endpoint %s is also an endpoint of tracked Service %s: NOTRACK is not applied (a connection tracked one way only breaks TCP); this Service's traffic stays tracked",
				dest, t)}
	})
	return w, refused
}
