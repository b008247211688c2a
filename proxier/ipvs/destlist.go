package ipvs

import (
	"net/netip"
	"slices"
)

// destList is a virtual server's destinations, sorted by address and
// port, each address and port once. The Writer holds two per virtual
// server, what the plan wants and what the kernel has; they are slices,
// not maps, because maps held several times the memory
// (BenchmarkRetainedState10000).
type destList []Destination

// newDestList sorts ds (a copy) by address and port; of two with the
// same address and port the later one is kept.
func newDestList(ds []Destination) destList {
	l := slices.Clone(ds)
	slices.SortStableFunc(l, func(a, b Destination) int { return a.AddrPort().Compare(b.AddrPort()) })
	out := l[:0]
	for i, d := range l {
		if i+1 < len(l) && l[i+1].AddrPort() == d.AddrPort() {
			continue // a later one wins
		}
		out = append(out, d)
	}
	return slices.Clip(out)
}

func (l destList) index(ap netip.AddrPort) (int, bool) {
	return slices.BinarySearchFunc(l, ap, func(d Destination, ap netip.AddrPort) int { return d.AddrPort().Compare(ap) })
}

// get returns the destination at ap.
func (l destList) get(ap netip.AddrPort) (Destination, bool) {
	if i, ok := l.index(ap); ok {
		return l[i], true
	}
	return Destination{}, false
}

// has reports whether a destination is at ap.
func (l destList) has(ap netip.AddrPort) bool {
	_, ok := l.index(ap)
	return ok
}

// put adds d, or replaces the destination at its address and port.
func (l *destList) put(d Destination) {
	i, ok := l.index(d.AddrPort())
	if ok {
		(*l)[i] = d
		return
	}
	*l = slices.Insert(*l, i, d)
}

// remove deletes the destination at ap, if any.
func (l *destList) remove(ap netip.AddrPort) {
	if i, ok := l.index(ap); ok {
		*l = slices.Delete(*l, i, i+1)
	}
}

// sameSettings reports whether l and o hold the same destinations with
// the same weights and forwarding methods; connection counts aside.
func (l destList) sameSettings(o destList) bool {
	return slices.EqualFunc(l, o, func(a, b Destination) bool {
		return a.Addr == b.Addr && a.Port == b.Port && a.Weight == b.Weight && a.Forward == b.Forward
	})
}

// put adds or replaces a mirrored destination, first copying a list
// shared with the desired one; but the next destination of a shared
// list's start (a new virtual server's destinations added in order)
// only lengthens it: the desired list is never written through it.
func (a *actual) put(d Destination) {
	if n := len(a.dests); a.shared && n < cap(a.dests) && a.dests[:n+1][n] == d {
		a.dests = a.dests[:n+1]
		return
	}
	a.own()
	a.dests.put(d)
}

// remove deletes a mirrored destination, first copying a list shared
// with the desired one.
func (a *actual) remove(ap netip.AddrPort) {
	if !a.dests.has(ap) {
		return
	}
	a.own()
	a.dests.remove(ap)
}

// setDests replaces the mirrored destinations with l, read from the
// kernel.
func (a *actual) setDests(l destList) { a.dests, a.shared = l, false }

func (a *actual) own() {
	if a.shared {
		a.dests, a.shared = slices.Clone(a.dests), false
	}
}

// share makes a virtual server's mirrored destinations its desired list
// when the kernel holds what is desired (connection counts aside: they
// are read afresh by each drain), so that the Writer holds the
// destinations of a virtual server in sync once, not twice (benchmarks/NOTES.md,
// memory). The lists are never changed in place while shared: the desired
// one is replaced whole by a new plan, the mirrored one copied first by
// put and remove.
func (w *Writer) share(k Key) {
	want, have := w.desired[k], w.mirror[k]
	if want == nil || have == nil || len(want.dests) == 0 {
		return
	}
	if have.dests.sameSettings(want.dests) {
		have.dests, have.shared = want.dests, true
	}
}
