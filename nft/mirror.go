package nft

import (
	"cmp"
	"slices"
	"strings"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// mirror is what we believe the kernel holds in our sets: the elements
// each service contributed, and for every element the services holding
// it. An element shared by several services (a virtual server address, an
// endpoint) stays until its last holder lets go.
//
// A set element has no value, so a count of its holders is all it needs;
// only map elements list their holders, whose order decides the value
// installed. On a large node the sets hold tens of thousands of
// elements, and a list for each would cost memory per element
// (benchmarks/NOTES.md, memory).
type mirror struct {
	services map[policy.ServiceKey][]contribution
	counts   map[elemID]int32    // set elements: how many services hold each
	valued   map[elemID]*holders // map elements: their holders
	perSet   []int               // installed elements by setID
}

// holders are the services holding one element, in arrival order. For a
// map element the first holder's value is the one installed.
type holders struct{ list []holder }

type holder struct {
	service policy.ServiceKey
	v       value
}

func newMirror() *mirror {
	return &mirror{
		services: map[policy.ServiceKey][]contribution{},
		counts:   map[elemID]int32{},
		valued:   map[elemID]*holders{},
		perSet:   make([]int, numSets()),
	}
}

// mirrorOf builds the mirror of a whole plan; services are taken in
// service order so that the installed value of a contested map key is
// stable.
func mirrorOf(plan policy.Plan) *mirror {
	m := newMirror()
	for svc, vss := range plan.Services() { // contributions keeps no group
		m.set(svc, contributions(vss), nil)
	}
	return m
}

// elementState is an element's installed value before a change.
type elementState struct {
	present bool
	v       value
}

// set replaces a service's contributions. When before is not nil it
// records, for every element whose holders change, its installed state as
// it was before the first such change.
func (m *mirror) set(service policy.ServiceKey, next []contribution, before map[elemID]elementState) {
	old := m.services[service]
	if len(old) == 0 { // a new service (all of them in mirrorOf): no diff to make
		for _, c := range next {
			m.acquire(c.id, service, c.v, before)
		}
		if len(next) > 0 {
			m.services[service] = next
		}
		return
	}
	nextByID := make(map[elemID]value, len(next))
	for _, c := range next {
		nextByID[c.id] = c.v
	}
	oldByID := make(map[elemID]value, len(old))
	for _, c := range old {
		oldByID[c.id] = c.v
		if v, ok := nextByID[c.id]; !ok || v != c.v {
			m.release(c.id, service, before)
		}
	}
	for _, c := range next {
		if v, ok := oldByID[c.id]; !ok || v != c.v {
			m.acquire(c.id, service, c.v, before)
		}
	}
	if len(next) == 0 {
		delete(m.services, service)
	} else {
		m.services[service] = next
	}
}

func (m *mirror) remember(id elemID, before map[elemID]elementState) {
	if before == nil {
		return
	}
	if _, ok := before[id]; ok {
		return
	}
	before[id] = m.installed(id)
}

// installed is the element's value as the kernel holds it.
func (m *mirror) installed(id elemID) elementState {
	if !id.set.hasValues() {
		return elementState{present: m.counts[id] > 0}
	}
	h := m.valued[id]
	if h == nil || len(h.list) == 0 {
		return elementState{}
	}
	return elementState{present: true, v: h.list[0].v}
}

// installedKey is installed of the element of set id whose key is key,
// without allocating: a map index by elemID{..., string(key)} converts
// the bytes in place.
func (m *mirror) installedKey(id setID, key []byte) elementState {
	if !id.hasValues() {
		return elementState{present: m.counts[elemID{set: id, key: string(key)}] > 0}
	}
	h := m.valued[elemID{set: id, key: string(key)}]
	if h == nil || len(h.list) == 0 {
		return elementState{}
	}
	return elementState{present: true, v: h.list[0].v}
}

// acquire adds service as a holder of the element. A service holds an
// element once: contributions has no duplicates.
func (m *mirror) acquire(id elemID, service policy.ServiceKey, v value, before map[elemID]elementState) {
	m.remember(id, before)
	if !id.set.hasValues() {
		if m.counts[id] == 0 {
			m.perSet[id.set]++
		}
		m.counts[id]++
		return
	}
	h := m.valued[id]
	if h == nil {
		h = &holders{}
		m.valued[id] = h
		m.perSet[id.set]++
	}
	h.list = append(h.list, holder{service: service, v: v})
}

// release removes service as a holder of an element it acquired.
func (m *mirror) release(id elemID, service policy.ServiceKey, before map[elemID]elementState) {
	m.remember(id, before)
	if !id.set.hasValues() {
		switch n := m.counts[id]; n {
		case 0:
		case 1:
			delete(m.counts, id)
			m.perSet[id.set]--
		default:
			m.counts[id] = n - 1
		}
		return
	}
	h := m.valued[id]
	if h == nil {
		return
	}
	if i := slices.IndexFunc(h.list, func(x holder) bool { return x.service == service }); i >= 0 {
		h.list = slices.Delete(h.list, i, i+1)
	}
	if len(h.list) == 0 {
		delete(m.valued, id)
		m.perSet[id.set]--
	}
}

// each calls f for every installed element, in no order.
func (m *mirror) each(f func(element)) {
	for id := range m.counts {
		f(element{id: id})
	}
	for id, h := range m.valued {
		f(element{id: id, v: h.list[0].v})
	}
}

// element is one installed element.
type element struct {
	id elemID
	v  value
}

// elements returns every installed element, sorted by set and key.
func (m *mirror) elements() []element {
	out := make([]element, 0, len(m.counts)+len(m.valued))
	m.each(func(e element) { out = append(out, e) })
	slices.SortFunc(out, func(a, b element) int { return compareIDs(a.id, b.id) })
	return out
}

func compareIDs(a, b elemID) int {
	if c := cmp.Compare(a.set, b.set); c != 0 {
		return c
	}
	return strings.Compare(a.key, b.key)
}

// diff is the element changes of one incremental sync. A changed map
// value is a delete and an add of the same key.
type diff struct {
	add, del []element
}

// diffOf compares the states recorded in before with the mirror now.
func (m *mirror) diffOf(before map[elemID]elementState) diff {
	var d diff
	for id, was := range before {
		now := m.installed(id)
		switch {
		case was == now:
		case !now.present:
			d.del = append(d.del, element{id: id, v: was.v})
		case !was.present:
			d.add = append(d.add, element{id: id, v: now.v})
		default:
			d.del = append(d.del, element{id: id, v: was.v})
			d.add = append(d.add, element{id: id, v: now.v})
		}
	}
	sortElements := func(es []element) {
		slices.SortFunc(es, func(a, b element) int { return compareIDs(a.id, b.id) })
	}
	sortElements(d.add)
	sortElements(d.del)
	return d
}
