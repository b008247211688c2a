package ipvs

import (
	"errors"
	"net/netip"
	"testing"
	"time"
)

// gatedCounts is a kernel handle over a fake kernel whose count of
// destinations is slow: it says on taken that it began, and returns when
// release is closed, what the kernel held when it began (or, late, when
// it returns): /proc/net/ip_vs on a large table.
type gatedCounts struct {
	*FakeKernel
	late    bool
	drop    Key           // left out of the count, as a read resumed by position can
	taken   chan struct{} // one signal per count
	release chan struct{}
}

func newGatedCounts(k *FakeKernel, late bool) *gatedCounts {
	return &gatedCounts{FakeKernel: k, late: late, taken: make(chan struct{}, 1), release: make(chan struct{})}
}

func (g *gatedCounts) DestinationCounts() (map[Key]int, error) {
	counts, err := g.FakeKernel.DestinationCounts()
	select {
	case g.taken <- struct{}{}:
	default:
	}
	<-g.release
	if g.late {
		counts, err = g.FakeKernel.DestinationCounts()
	}
	delete(counts, g.drop)
	return counts, err
}

// checkNow runs Check, failing the test if it waits for the gated count.
func checkNow(t *testing.T, w *Writer) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- w.Check() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Check waited for the count of destinations")
		return nil
	}
}

// answered waits until the count under way has answered, so that the
// next Check finds it done whatever its wait.
func answered(t *testing.T, w *Writer) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); len(w.drift.count.done) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the count never answered")
		}
	}
}

// TestCheckDoesNotWaitForTheCount: with a second handle (RepairReader),
// Check counts every virtual server's destinations on it in the
// background, so that a slow count (seconds at ten thousand virtual
// servers under a slow CPU) never holds up the loop that calls Check,
// nor the syncs behind it, and no dump of the virtual servers stands in
// for it meanwhile; a later Check compares what it read: a destination
// or a virtual server deleted by hand is drift, a virtual server an
// Apply changed while the count ran is not judged by it, and one the
// count missed (the kernel hands the table out by position, which an
// Apply meanwhile shifts) is read alone before it is called gone.
func TestCheckDoesNotWaitForTheCount(t *testing.T) {
	for _, tc := range []struct {
		name      string
		late      bool                       // the count reads the kernel as it ends
		drop      string                     // a virtual server the count misses
		meanwhile func(t *testing.T, e *env) // while the count runs
		drift     bool
	}{
		{name: "a destination deleted by hand while the count runs is drift once it ends", late: true,
			meanwhile: func(t *testing.T, e *env) {
				must(t, e.k.DeleteDestination(key("10.96.0.10:80/TCP"), Destination{Addr: netip.MustParseAddr("10.244.1.5"), Port: 8080}))
			}, drift: true},
		{name: "a virtual server an Apply changed while the count ran is not judged by it",
			meanwhile: func(t *testing.T, e *env) { e.mustApply(dns("10.244.1.7:53", "10.244.1.8:53")) }},
		{name: "a virtual server the count missed is read alone, and is there", drop: "10.96.0.10:80/TCP",
			meanwhile: func(t *testing.T, e *env) {
				e.mustApply(svc("db", vs("ClusterIP 10.96.0.20:5432/TCP", "10.244.1.9:5432")))
			}},
		{name: "a virtual server deleted by hand while the count runs is drift once it ends", late: true,
			meanwhile: func(t *testing.T, e *env) { must(t, e.k.DeleteVirtualServer(key("10.96.0.53:53/UDP"))) }, drift: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			g := newGatedCounts(e.k, tc.late)
			if tc.drop != "" {
				g.drop = key(tc.drop)
			}
			t.Cleanup(func() {
				select {
				case <-g.release:
				default:
					close(g.release)
				}
			})
			e.cfg.RepairReader = g
			e.w = New(e.cfg, g, e.l, e.sys) // the count is slow on either handle
			e.mustResync(plan(web("10.244.1.5:8080"), dns("10.244.1.7:53")))
			dumps := 0
			e.k.Fault = func(op, target string) error {
				if op == "list-services" {
					dumps++
				}
				return e.rec(op, target)
			}
			e.advance(driftCheckInterval)
			if err := checkNow(t, e.w); err != nil || e.w.NeedsResync() {
				t.Fatalf("Check while the count runs: %v, NeedsResync %v; want neither", err, e.w.NeedsResync())
			}
			if dumps != 0 {
				t.Errorf("Check dumped the virtual servers %d times while the count, which lists them, ran; want 0", dumps)
			}
			<-g.taken
			tc.meanwhile(t, e)
			close(g.release)
			answered(t, e.w)
			e.advance(driftCheckInterval)
			err := checkNow(t, e.w)
			if got := errors.Is(err, ErrDrift) && e.w.NeedsResync(); got != tc.drift {
				t.Fatalf("Check after the count: %v, NeedsResync %v; want drift %v", err, e.w.NeedsResync(), tc.drift)
			}
			if !tc.drift && err != nil {
				t.Fatalf("Check after the count: %v", err)
			}
			if e.w.drift.count.done != nil {
				t.Errorf("the count was not compared by the Check after it ended")
			}
		})
	}
}

// skewedCounts is a fake kernel whose count of destinations lists one
// virtual server twice over (doubled: another namespace's of the same
// address, as a shared service table shows it) or not at all (dropped:
// the listing shifted or cut short).
type skewedCounts struct {
	*FakeKernel
	doubled, dropped Key
}

func (s skewedCounts) DestinationCounts() (map[Key]int, error) {
	counts, err := s.FakeKernel.DestinationCounts()
	if _, ok := counts[s.doubled]; ok {
		counts[s.doubled] *= 2
	}
	delete(counts, s.dropped)
	return counts, err
}

// TestCheckTrustsNoCountADirectReadContradicts: a count that calls one
// of our virtual servers gone or changed is confirmed by reading that
// virtual server alone; where that read shows it as programmed, the
// count is no drift, and is treated as unreadable (counted again after
// countCheckRetry); where it agrees, it is drift.
func TestCheckTrustsNoCountADirectReadContradicts(t *testing.T) {
	web80 := key("10.96.0.10:80/TCP")
	for _, tc := range []struct {
		name     string
		doubled  Key
		dropped  Key
		edit     func(k *FakeKernel) error
		drift    bool
		countDue time.Duration // after the Check's start
	}{
		{name: "doubled", doubled: web80, countDue: countCheckRetry},
		{name: "dropped", dropped: web80, countDue: countCheckRetry},
		{name: "dropped and deleted", dropped: web80, edit: func(k *FakeKernel) error { return k.DeleteVirtualServer(web80) }, drift: true},
		{name: "a destination deleted", edit: func(k *FakeKernel) error {
			return k.DeleteDestination(web80, Destination{Addr: netip.MustParseAddr("10.244.1.5"), Port: 8080})
		}, drift: true},
		{name: "nothing changed", countDue: driftCheckInterval},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.w = New(e.cfg, skewedCounts{FakeKernel: e.k, doubled: tc.doubled, dropped: tc.dropped}, e.l, e.sys)
			e.mustResync(plan(web("10.244.1.5:8080"), dns("10.244.1.7:53")))
			if tc.edit != nil {
				must(t, tc.edit(e.k))
			}
			e.advance(driftCheckInterval)
			start := e.now
			err := e.w.Check()
			if got := errors.Is(err, ErrDrift) && e.w.NeedsResync(); got != tc.drift {
				t.Fatalf("Check: %v, NeedsResync %v; want drift %v", err, e.w.NeedsResync(), tc.drift)
			}
			if tc.drift {
				return
			}
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if got := e.w.drift.countDue.Sub(start); got != tc.countDue {
				t.Errorf("the count is next due %v after, want %v", got, tc.countDue)
			}
		})
	}
}
