package ipvs

import (
	"errors"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestInterfaceMustBeDummy: Config.Interface naming a link that is not a
// dummy interface (lo, eth0) is refused by every sync and by Cleanup:
// its addresses are never stripped, the link never deleted.
func TestInterfaceMustBeDummy(t *testing.T) {
	for _, name := range []string{"lo", "eth0"} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, Config{Interface: name})
			must(t, e.l.AddAddr("lo", netip.MustParsePrefix("127.0.0.1/8")))
			before := e.l.Dump()
			for what, err := range map[string]error{
				"Apply":   e.apply(web("10.244.1.5:8080")),
				"Resync":  e.resync(plan(web("10.244.1.5:8080"))),
				"Cleanup": e.w.Cleanup(),
			} {
				if !errors.Is(err, ErrNotDummy) {
					t.Errorf("%s: error %v, want ErrNotDummy", what, err)
				}
			}
			if got := e.l.Dump(); got != before {
				t.Errorf("links changed:\n%s\nwant:\n%s", got, before)
			}
		})
	}
}

// TestInterfaceMustBeOurs: Config.Interface may name only a dummy
// interface this proxy created (LinkAlias) or one named kube-ipvs0
// (kube-proxy's, left without the alias): another agent's dummy interface
// (NodeLocal DNSCache's nodelocaldns) is refused by every sync and by
// Cleanup, its address kept and the link never deleted; ours and
// kube-proxy's are managed, and Cleanup in a fresh process deletes them.
func TestInterfaceMustBeOurs(t *testing.T) {
	for _, tc := range []struct {
		name     string
		link     string
		existing bool // the link exists, without the alias, before the Writer
		want     error
	}{
		{name: "another agent's dummy interface is refused", link: "nodelocaldns", existing: true, want: ErrForeignLink},
		{name: "a dummy interface we create under another name is ours", link: "kipvs1"},
		{name: "kube-proxy's kube-ipvs0 without the alias is ours", link: DefaultInterface, existing: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{Interface: tc.link})
			if tc.existing {
				must(t, e.l.AddLink(tc.link, "dummy"))
				must(t, e.l.AddAddr(tc.link, netip.MustParsePrefix("169.254.20.10/32")))
			}
			before := e.l.Dump()
			errs := map[string]error{"Apply": e.apply(web("10.244.1.5:8080")), "Resync": e.resync(plan(web("10.244.1.5:8080")))}
			e.restart()
			errs["Cleanup"] = e.w.Cleanup()
			for what, err := range errs {
				if !errors.Is(err, tc.want) {
					t.Errorf("%s: error %v, want %v", what, err, tc.want)
				}
			}
			got := e.l.Dump()
			switch {
			case tc.want != nil && got != before:
				t.Errorf("links changed:\n%s\nwant:\n%s", got, before)
			case tc.want == nil && strings.Contains(got, "link "+tc.link+" "):
				t.Errorf("Cleanup left %s:\n%s", tc.link, got)
			}
		})
	}
}

// TestDeletedLinkIsNoticed: when kube-ipvs0 is deleted, or deleted and
// re-created (a new index, no addresses), by someone else, the next Apply
// and Check notice it at once, change nothing and ask for a Resync, which
// restores the link and its addresses.
func TestDeletedLinkIsNoticed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		recreate bool
		check    bool // Check instead of Apply
	}{
		{"deleted, Apply", false, false},
		{"replaced, Apply", true, false},
		{"deleted, Check", false, true},
		{"replaced, Check", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			p := plan(web("10.244.1.5:8080"))
			e.mustResync(p)
			if err := e.w.Check(); err != nil {
				t.Fatalf("Check with the link in place: %v", err)
			}
			want := e.l.Dump()
			must(t, e.l.DeleteLink(DefaultInterface))
			if tc.recreate {
				must(t, e.l.AddLink(DefaultInterface, "dummy"))
			}
			var err error
			if tc.check {
				err = e.w.Check()
			} else {
				err = e.apply(dns("10.244.1.7:53"))
			}
			if !errors.Is(err, ErrLinkChanged) || !e.w.NeedsResync() {
				t.Fatalf("error %v, NeedsResync %v; want ErrLinkChanged and true", err, e.w.NeedsResync())
			}
			e.mustResync(p)
			if got := e.l.Dump(); !strings.Contains(got, "addr 203.0.113.10/32") || (!tc.recreate && got != want) {
				t.Errorf("after Resync:\n%s\nwant:\n%s", got, want)
			}
			if e.w.NeedsResync() || e.w.Check() != nil {
				t.Errorf("still NeedsResync after the Resync")
			}
		})
	}
}

// TestPlaneWideErrorsForceResync: an error that leaves the whole data
// plane unknown (the link gone while adding an address, a dead netlink
// socket) is not a service's: it asks for a Resync.
func TestPlaneWideErrorsForceResync(t *testing.T) {
	for _, tc := range []struct {
		name, op, target string
		err              error
		wantResync       bool
	}{
		{"link gone", "add-address", "kube-ipvs0 10.96.0.53/32", syscall.ENODEV, true},
		{"socket dead", "add-service", "10.96.0.53:53/UDP", syscall.EBADF, true},
		{"lost messages", "add-destination", "10.96.0.53:53/UDP 10.244.1.7:53", syscall.ENOBUFS, true},
		{"module missing", "add-service", "10.96.0.53:53/UDP", syscall.ENOENT, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.mustApply()
			e.fault(tc.op, tc.target, tc.err)
			err := e.apply(dns("10.244.1.7:53"))
			svcErrs, rest := SplitErrors(err)
			if got := e.w.NeedsResync(); got != tc.wantResync || (rest != nil) != tc.wantResync || (len(svcErrs) > 0) == tc.wantResync {
				t.Errorf("NeedsResync %v, service errors %v, rest %v; want resync %v", got, svcErrs, rest, tc.wantResync)
			}
		})
	}
}

// TestCheckNoticesDrift: Check notices one of our virtual servers or one
// of kube-ipvs0's addresses deleted by hand, asks for a Resync and
// changes nothing; the Resync restores it. Someone else's virtual server
// or address is no drift.
func TestCheckNoticesDrift(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(e *env) error
		drift bool
	}{
		{"our virtual server deleted", func(e *env) error { return e.k.DeleteVirtualServer(key("10.96.0.53:53/UDP")) }, true},
		{"our address removed", func(e *env) error {
			return e.l.DelAddr(DefaultInterface, netip.MustParsePrefix("203.0.113.10/32"))
		}, true},
		{"one of our destinations deleted", func(e *env) error {
			return e.k.DeleteDestination(key("10.96.0.53:53/UDP"), Destination{Addr: netip.MustParseAddr("10.244.1.7"), Port: 53})
		}, true},
		{"a destination added to ours", func(e *env) error {
			return e.k.AddDestination(key("10.96.0.53:53/UDP"), Destination{Addr: netip.MustParseAddr("10.244.9.9"), Port: 53, Weight: 1})
		}, true},
		{"a foreign virtual server added", func(e *env) error {
			return e.k.AddVirtualServer(VirtualServer{Key: key("192.168.1.10:22/TCP"), Scheduler: "rr"})
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			p := plan(web("10.244.1.5:8080"), dns("10.244.1.7:53"))
			e.mustResync(p)
			want := e.dump()
			must(t, tc.edit(e))
			edited := e.dump()
			err := e.w.Check()
			if got := errors.Is(err, ErrDrift) && e.w.NeedsResync(); got != tc.drift {
				t.Fatalf("Check: %v, NeedsResync %v; want drift %v", err, e.w.NeedsResync(), tc.drift)
			}
			if e.dump() != edited {
				t.Errorf("Check changed the kernel")
			}
			if !tc.drift {
				return
			}
			e.mustResync(p)
			if got := e.dump(); got != want {
				t.Errorf("after Resync:\n%s\nwant:\n%s", got, want)
			}
			if err := e.w.Check(); err != nil || e.w.NeedsResync() {
				t.Errorf("Check after the Resync: %v, NeedsResync %v", err, e.w.NeedsResync())
			}
		})
	}
}

// TestCheckReadsDestinationsInTurnWithinItsBudget: a Check reads the
// destinations of as many virtual servers as its budget allows, from
// where the last one stopped, so a destination replaced by hand (the
// count unchanged, which the count check cannot see) on any of them is
// found within one pass of Checks, each at most one read over budget.
func TestCheckReadsDestinationsInTurnWithinItsBudget(t *testing.T) {
	e := newEnv(t, Config{})
	p := plan(web("10.244.1.5:8080"), dns("10.244.1.7:53"))
	e.mustResync(p)
	reads := 0
	e.k.Fault = func(op, target string) error {
		if op == "list-destinations" {
			reads++
			e.now = e.now.Add(destCheckBudget) // each read uses the whole budget
		}
		return e.rec(op, target)
	}
	vss := len(e.w.desired)
	must(t, e.k.DeleteDestination(key("10.96.0.53:53/UDP"), Destination{Addr: netip.MustParseAddr("10.244.1.7"), Port: 53}))
	must(t, e.k.AddDestination(key("10.96.0.53:53/UDP"), Destination{Addr: netip.MustParseAddr("10.244.1.9"), Port: 53, Weight: 1}))
	checks := 0
	for ; checks <= vss; checks++ {
		e.now = e.now.Add(driftCheckInterval)
		before := reads
		err := e.w.Check()
		if got := reads - before; got != 1 {
			t.Fatalf("Check %d read the destinations of %d virtual servers; want 1 (the budget)", checks+1, got)
		}
		if errors.Is(err, ErrDrift) {
			break
		}
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
	}
	if checks == vss+1 {
		t.Fatalf("the deleted destination not found in %d Checks, one pass over %d virtual servers", checks, vss)
	}
	t.Logf("found at Check %d of at most %d", checks+1, vss)
}

// TestCheckCountsEveryVirtualServersDestinationsInOneRead: a destination
// deleted or added by hand on any virtual server is found by the first
// Check, in one read of every count and one read of the destinations of
// the virtual server it names (the count confirmed); and the count is
// read again no sooner than countCheckCostShare times its last duration.
func TestCheckCountsEveryVirtualServersDestinationsInOneRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(k *FakeKernel) error
	}{
		{"a destination deleted", func(k *FakeKernel) error {
			return k.DeleteDestination(key("10.96.0.53:53/UDP"), Destination{Addr: netip.MustParseAddr("10.244.1.7"), Port: 53})
		}},
		{"a destination added", func(k *FakeKernel) error {
			return k.AddDestination(key("10.96.0.10:80/TCP"), Destination{Addr: netip.MustParseAddr("10.244.9.9"), Port: 8080, Weight: 1})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			p := plan(web("10.244.1.5:8080"), dns("10.244.1.7:53"))
			e.mustResync(p)
			reads, counts := 0, 0
			e.k.Fault = func(op, target string) error {
				switch op {
				case "list-destinations":
					reads++
				case "count-destinations":
					counts++
				}
				return e.rec(op, target)
			}
			must(t, tc.edit(e.k))
			e.now = e.now.Add(driftCheckInterval)
			if err := e.w.Check(); !errors.Is(err, ErrDrift) || !e.w.NeedsResync() {
				t.Fatalf("Check: %v, NeedsResync %v; want drift", err, e.w.NeedsResync())
			}
			if counts != 1 || reads != 1 {
				t.Errorf("%d count reads and %d destination reads, want 1 and 1", counts, reads)
			}
		})
	}
	t.Run("an unreadable table is no drift, and is tried again later", func(t *testing.T) {
		e := newEnv(t, Config{})
		e.mustResync(plan(web("10.244.1.5:8080")))
		counts := 0
		e.k.Fault = func(op, target string) error {
			if op == "count-destinations" {
				counts++
				return os.ErrPermission
			}
			return e.rec(op, target)
		}
		for range 5 {
			e.now = e.now.Add(driftCheckInterval)
			if err := e.w.Check(); err != nil || e.w.NeedsResync() {
				t.Fatalf("Check: %v, NeedsResync %v; want neither", err, e.w.NeedsResync())
			}
		}
		if counts != 1 {
			t.Errorf("%d count reads in 5 s, want 1", counts)
		}
		e.now = e.now.Add(countCheckRetry)
		_ = e.w.Check()
		if counts != 2 {
			t.Errorf("%d count reads after countCheckRetry, want 2", counts)
		}
	})
	t.Run("a costly count is read less often", func(t *testing.T) {
		e := newEnv(t, Config{})
		e.mustResync(plan(web("10.244.1.5:8080")))
		counts := 0
		const cost = 100 * time.Millisecond
		e.k.Fault = func(op, target string) error {
			if op == "count-destinations" {
				counts++
				e.now = e.now.Add(cost)
			}
			return e.rec(op, target)
		}
		start := e.now
		for e.now.Sub(start) < 3*countCheckCostShare*cost {
			e.now = e.now.Add(driftCheckInterval)
			if err := e.w.Check(); err != nil {
				t.Fatal(err)
			}
		}
		if want := 3; counts < want-1 || counts > want+1 {
			t.Errorf("%d count reads in %v at %v each, want about %d", counts, e.now.Sub(start), cost, want)
		}
	})
}

// TestDeletedVirtualServerFoundByTheCountRead: the count read lists
// every virtual server, so one of ours deleted by hand (here one without
// destinations, whose count cannot differ) is found without a dump of
// the virtual servers; where the table cannot be read, the dump finds it.
func TestDeletedVirtualServerFoundByTheCountRead(t *testing.T) {
	for _, tc := range []struct {
		name       string
		unreadable bool
		wantDumps  int
	}{
		{"the count read finds it", false, 0},
		{"the dump finds it where the table cannot be read", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.mustResync(plan(web()))
			dumps := 0
			e.k.Fault = func(op, target string) error {
				switch {
				case op == "count-destinations" && tc.unreadable:
					return os.ErrPermission
				case op == "list-services":
					dumps++
				}
				return e.rec(op, target)
			}
			e.now = e.now.Add(driftCheckInterval)
			must(t, e.w.Check()) // the first count read, or its failure
			dumps = 0
			must(t, e.k.DeleteVirtualServer(key("10.96.0.10:80/TCP")))
			e.now = e.now.Add(countCheckRetry)
			if err := e.w.Check(); !errors.Is(err, ErrDrift) || !e.w.NeedsResync() {
				t.Fatalf("Check: %v, NeedsResync %v; want drift", err, e.w.NeedsResync())
			}
			if dumps != tc.wantDumps {
				t.Errorf("%d dumps of the virtual servers, want %d", dumps, tc.wantDumps)
			}
		})
	}
}
