package ipvs

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// reads counts the kernel reads (list-* operations) fn makes.
func (e *env) reads(fn func()) int {
	e.t.Helper()
	n := 0
	count := func(op, target string) error {
		if strings.HasPrefix(op, "list-") {
			n++
		}
		return e.rec(op, target)
	}
	e.k.Fault, e.l.Fault = count, count
	defer func() { e.k.Fault, e.l.Fault = e.rec, e.rec }()
	fn()
	return n
}

// TestHeadStartOnlyAdds: a head start adds the missing addresses and
// virtual servers and nothing else: a virtual server that exists keeps
// its destinations and settings, an address no plan binds stays, and
// foreign virtual servers are untouched.
func TestHeadStartOnlyAdds(t *testing.T) {
	e := newEnv(t, Config{})
	addForeign(t, e)
	// What an earlier run left: web's ClusterIP with one destination and
	// another scheduler, and the address of a service gone since.
	e.mustResync(plan(svc("web", vs("ClusterIP 10.96.0.10:80/TCP", "10.244.9.9:8080")), svc("old", vs("ClusterIP 10.96.0.99:80/TCP"))))
	before := e.k.Dump()
	web := web()
	web.VirtualServers[0].Scheduler = "wrr"
	e.restart()
	e.trace = nil
	if err := e.w.HeadStart(plan(web, dns())); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"add-address kube-ipvs0 10.96.0.53/32",
		"add-address kube-ipvs0 203.0.113.10/32",
		"add-service 10.96.0.53:53/TCP",
		"add-service 10.96.0.53:53/UDP",
		"add-service 192.168.1.10:30080/TCP",
		"add-service 203.0.113.10:80/TCP",
	}
	if diff := cmp.Diff(want, e.trace); diff != "" {
		t.Errorf("kernel changes (-want +got):\n%s", diff)
	}
	for _, line := range strings.Split(before, "\n") {
		if !strings.Contains(e.k.Dump(), line) {
			t.Errorf("lost %q from the kernel:\n%s", line, e.k.Dump())
		}
	}
	if !strings.Contains(e.l.Dump(), "10.96.0.99/32") {
		t.Errorf("the unplanned address went:\n%s", e.l.Dump())
	}
}

// TestResyncAfterHeadStartTrustsTheMirror: the Resync after a head start
// reads nothing from the kernel, adds the destinations, repairs what the
// head start left alone, and leaves the kernel as a Resync alone would.
func TestResyncAfterHeadStartTrustsTheMirror(t *testing.T) {
	full := plan(web("10.244.1.5:8080", "10.244.2.5:8080*3"), dns("10.244.1.7:53"))
	alone := newEnv(t, Config{})
	alone.mustResync(full)

	e := newEnv(t, Config{})
	e.mustResync(plan(svc("old", vs("ClusterIP 10.96.0.99:80/TCP", "10.244.9.9:80"))))
	e.restart()
	if err := e.w.HeadStart(full.WithoutEndpoints()); err != nil {
		t.Fatal(err)
	}
	if d := e.opsDelta(func() {}); len(d) != 0 {
		t.Fatal(d)
	}
	var ops map[string]int
	n := e.reads(func() { ops = e.opsDelta(func() { e.mustResync(full) }) })
	if n != 0 {
		t.Errorf("the Resync after a head start made %d kernel reads, want none", n)
	}
	if want := "add-destination=8 delete-address=1 delete-service=1"; opsString(ops) != want {
		t.Errorf("Resync ops %s, want %s", opsString(ops), want)
	}
	if diff := cmp.Diff(alone.dump(), e.dump()); diff != "" {
		t.Errorf("kernel after head start and Resync differs from a Resync alone (-alone +got):\n%s", diff)
	}
	// The Resync after that reads the kernel again, as always.
	if n := e.reads(func() { e.mustResync(full) }); n == 0 {
		t.Error("the second Resync read nothing from the kernel")
	}
}

// TestHeadStartFailureMakesResyncRead: a head start that could not read
// the kernel programs nothing, and the Resync reads the kernel.
func TestHeadStartFailureMakesResyncRead(t *testing.T) {
	e := newEnv(t, Config{})
	e.fault("list-services", "", syscall.ENOBUFS)
	err := e.w.HeadStart(plan(web()))
	if !errors.Is(err, syscall.ENOBUFS) {
		t.Fatalf("HeadStart: %v, want ENOBUFS", err)
	}
	if len(e.trace) != 0 {
		t.Errorf("a failed head start changed the kernel: %v", e.trace)
	}
	e.fault("", "", nil)
	if n := e.reads(func() { e.mustResync(plan(web("10.244.1.5:8080"))) }); n == 0 {
		t.Error("the Resync after a failed head start read nothing from the kernel")
	}
}

// TestHeadStartAfterASyncDoesNothing: once the writer has synced, a head
// start (with another plan) changes nothing.
func TestHeadStartAfterASyncDoesNothing(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustResync(plan(web("10.244.1.5:8080")))
	if d := e.opsDelta(func() {
		if err := e.w.HeadStart(plan(dns())); err != nil {
			t.Fatal(err)
		}
	}); len(d) != 0 {
		t.Errorf("head start after a Resync made changes: %v", d)
	}
}
