package ipvs

import (
	"slices"
	"testing"
)

// The mirror holds a virtual server's destinations once they are what
// the plan wants by sharing the desired list, and never changes a shared
// list in place: drift a repair finds, a drain and a new plan each leave
// every desired list as the plan made it.
func TestMirrorSharesTheWantedListAndCopiesBeforeAChange(t *testing.T) {
	k, a, b := key("10.96.0.10:80/TCP"), dest("10.244.1.5:80"), dest("10.244.1.6:80")
	e := newEnv(t, Config{})
	e.mustResync(plan(one("10.244.1.5:80", "10.244.1.6:80")))
	first := e.w.desired[k].dests
	frozen := slices.Clone(first)
	shared := func(step string) {
		t.Helper()
		have, want := e.w.mirror[k], e.w.desired[k]
		if !have.shared || &have.dests[0] != &want.dests[0] {
			t.Errorf("%s: the mirror does not share the desired list (shared %v)", step, have.shared)
		}
	}
	shared("after the Resync")

	// Drift behind our back: the repair reads it into the mirror (a copy)
	// and programs the desired weight again.
	must(t, e.k.UpdateDestination(k, Destination{Addr: a.Addr(), Port: a.Port(), Weight: 7}))
	must(t, e.w.Repair())
	if got := destLine(e, "10.244.1.5:80"); got != "10.244.1.5:80 masq weight=1 active=0 inactive=0" {
		t.Errorf("after the repair: %q, want weight 1 again", got)
	}
	shared("after the repair")

	// A drain (connections live on b) and a new plan.
	must(t, e.k.SetConns(k, b, 2, 1))
	e.mustApply(one("10.244.1.5:80"))
	if got := destLine(e, "10.244.1.6:80"); got != "10.244.1.6:80 masq weight=0 active=2 inactive=1" {
		t.Errorf("draining: %q, want weight 0", got)
	}
	if have := e.w.mirror[k]; have.shared {
		t.Errorf("the mirror shares the desired list while it holds a draining destination: %v", have.dests)
	}
	must(t, e.k.SetConns(k, b, 0, 0))
	e.mustApply()
	if got := destLine(e, "10.244.1.6:80"); got != "" {
		t.Errorf("drained: %q, want it deleted", got)
	}
	shared("after the drain")
	if !slices.Equal(first, frozen) {
		t.Errorf("the first plan's desired list was changed in place: %v, was %v", first, frozen)
	}
	if want := e.w.desired[k].dests; len(want) != 1 || want[0].AddrPort() != a || want[0].Weight != 1 {
		t.Errorf("desired list %v, want only %v at weight 1", want, a)
	}
}

// A new virtual server's mirror takes the start of its desired list as
// its destinations are added in the desired order, copying nothing; any
// other change (a destination out of that order, another weight) copies
// the list first, and the desired list is never written through it.
func TestNewVirtualServersMirrorTakesTheStartOfItsDesiredList(t *testing.T) {
	d := func(s string, w int32) Destination {
		ap := dest(s)
		return Destination{Addr: ap.Addr(), Port: ap.Port(), Weight: w, Forward: ForwardMasq}
	}
	want := newDestList([]Destination{d("10.244.1.1:80", 1), d("10.244.1.2:80", 1), d("10.244.1.3:80", 1)})
	for _, tc := range []struct {
		name       string
		puts       []Destination
		wantShared bool
	}{
		{"in order: the desired list's start, shared", []Destination{want[0], want[1]}, true},
		{"all in order: the desired list, shared", []Destination{want[0], want[1], want[2]}, true},
		{"one skipped: copied", []Destination{want[0], want[2]}, false},
		{"another weight: copied", []Destination{want[0], d("10.244.1.2:80", 5)}, false},
		{"out of order: copied", []Destination{want[1], want[0]}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frozen := slices.Clone(want)
			a := &actual{dests: want[:0], shared: true}
			for _, x := range tc.puts {
				a.put(x)
			}
			if got := []Destination(a.dests); !slices.Equal(got, newDestList(tc.puts)) {
				t.Errorf("mirror %v, want %v", got, tc.puts)
			}
			if shares := a.shared && &a.dests[0] == &want[0]; shares != tc.wantShared {
				t.Errorf("shares the desired list: %v, want %v", shares, tc.wantShared)
			}
			if !slices.Equal(want, frozen) {
				t.Errorf("the desired list was written: %v, was %v", want, frozen)
			}
		})
	}
}
