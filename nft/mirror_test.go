package nft

import (
	"testing"
	"unsafe"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// TestMirrorHoldsAnElementUntilItsLastHolder: a set element (a shared
// service address) is counted, a map element (empty-services) lists its
// holders, and either stays installed until the last service holding it
// lets go; a contested map element takes its first remaining holder's
// value.
func TestMirrorHoldsAnElementUntilItsLastHolder(t *testing.T) {
	web, api := key("default/web"), key("default/api")
	ip := elemID{set: idOf(setServiceIPs, familyV4), key: string(keyBuf(nil).addr(addr("10.96.0.10")))}
	empty := elemID{set: idOf(setEmptyServices, familyV4), key: string(keyBuf(nil).addr(addr("10.96.0.10")).proto(6).port(80))}
	reject := vs("default/web", "10.96.0.10", 80)
	drop := vs("default/api", "10.96.0.10", 80)
	drop.WhenEmpty = policy.EmptyDrop

	m := newMirror()
	m.set(web, contributions([]policy.VirtualServer{reject}), nil)
	m.set(api, contributions([]policy.VirtualServer{drop}), nil)
	steps := []struct {
		name      string
		do        func()
		ipPresent bool
		empty     elementState
	}{
		{"both hold: the first holder's value is installed", func() {}, true, elementState{present: true, v: value{verdict: rejectGoto}}},
		{"the first lets go: the second's value is installed", func() { m.set(web, nil, nil) }, true, elementState{present: true, v: value{verdict: dropVerdict}}},
		{"the last lets go: both are gone", func() { m.set(api, nil, nil) }, false, elementState{}},
	}
	for _, s := range steps {
		s.do()
		if got := m.installed(ip); got.present != s.ipPresent {
			t.Errorf("%s: service address present = %t, want %t", s.name, got.present, s.ipPresent)
		}
		if got := m.installed(empty); got != s.empty {
			t.Errorf("%s: empty-services element = %+v, want %+v", s.name, got, s.empty)
		}
	}
	if len(m.counts) != 0 || len(m.valued) != 0 || len(m.services) != 0 {
		t.Errorf("mirror after every service let go: %d counted, %d listed, %d services; want none", len(m.counts), len(m.valued), len(m.services))
	}
	for id, n := range m.perSet {
		if n != 0 {
			t.Errorf("set %s: %d installed elements after every service let go", setID(id).name(), n)
		}
	}
}

// TestContributionsAreKeptCompact: the mirror keeps every service's
// contributions, so they come at their length, and a virtual server's
// key, in several sets, is one string (benchmarks/NOTES.md, memory).
func TestContributionsAreKeptCompact(t *testing.T) {
	cs := contributions([]policy.VirtualServer{vs("default/web", "10.96.0.10", 80, dest("10.244.1.5", 8080), dest("10.244.1.6", 8080))})
	if cap(cs) != len(cs) {
		t.Errorf("contributions: len %d, cap %d; want them equal", len(cs), cap(cs))
	}
	byKey := map[string]*byte{}
	for _, c := range cs {
		p := unsafe.StringData(c.id.key)
		if q, ok := byKey[c.id.key]; ok && q != p {
			t.Errorf("key %x of %s is a second copy", c.id.key, c.id.set.name())
		}
		byKey[c.id.key] = p
	}
	if len(byKey) == len(cs) {
		t.Errorf("no two of %d contributions share a key; the test needs a virtual server key in two sets", len(cs))
	}
}
