package ipvs

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// repairPlan is three services: two ClusterIPs on kube-ipvs0 and a
// NodePort on the node address.
func repairPlan() []policy.ServicePlan {
	return []policy.ServicePlan{
		svc("a", vs("ClusterIP 10.96.0.1:80/TCP", "10.244.1.1:8080", "10.244.1.2:8080")),
		svc("b", vs("ClusterIP 10.96.0.2:53/UDP", "10.244.1.3:53")),
		svc("c", vs("NodePort 192.168.1.10:30080/TCP", "10.244.1.1:8080")),
	}
}

// TestRepairRepairsDrift: a Repair, without a plan, undoes drift against
// what the Writer last programmed, with exactly the changes needed; with
// nothing changed it only reads; foreign virtual servers are untouched.
func TestRepairRepairsDrift(t *testing.T) {
	for _, tc := range []struct {
		name  string
		drift func(e *env)
		ops   string
	}{
		{name: "nothing changed: reads only", drift: func(*env) {}, ops: ""},
		{name: "virtual server deleted by hand is re-added", drift: func(e *env) {
			_ = e.k.DeleteVirtualServer(key("10.96.0.1:80/TCP"))
		}, ops: "add-destination=2 add-service=1"},
		{name: "destination deleted by hand is re-added", drift: func(e *env) {
			_ = e.k.DeleteDestination(key("192.168.1.10:30080/TCP"), Destination{Addr: netip.MustParseAddr("10.244.1.1"), Port: 8080})
		}, ops: "add-destination=1"},
		{name: "weight changed by hand is restored", drift: func(e *env) {
			_ = e.k.UpdateDestination(key("10.96.0.2:53/UDP"), Destination{Addr: netip.MustParseAddr("10.244.1.3"), Port: 53, Weight: 7})
		}, ops: "update-destination=1"},
		{name: "scheduler changed by hand is restored", drift: func(e *env) {
			_ = e.k.UpdateVirtualServer(VirtualServer{Key: key("10.96.0.1:80/TCP"), Scheduler: "wrr"})
		}, ops: "update-service=1"},
		{name: "address deleted by hand is re-added", drift: func(e *env) {
			_ = e.l.DelAddr(DefaultInterface, netip.MustParsePrefix("10.96.0.2/32"))
		}, ops: "add-address=1"},
		{name: "virtual server added by hand on our address is deleted", drift: func(e *env) {
			_ = e.k.AddVirtualServer(VirtualServer{Key: key("10.96.0.1:81/TCP"), Scheduler: "rr"})
		}, ops: "delete-service=1"},
		{name: "foreign virtual server is left alone", drift: func(e *env) {
			_ = e.k.AddVirtualServer(VirtualServer{Key: key("192.0.2.9:80/TCP"), Scheduler: "rr"})
		}, ops: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.mustResync(plan(repairPlan()...))
			want := e.dump()
			tc.drift(e)
			drifted := e.dump()
			var err error
			ops := e.opsDelta(func() { err = e.w.Repair() })
			if err != nil {
				t.Fatalf("Repair: %v", err)
			}
			if got := opsString(ops); got != tc.ops {
				t.Errorf("Repair made ops %q, want %q", got, tc.ops)
			}
			if tc.ops != "" && e.dump() != want {
				t.Errorf("after Repair:\n%s\nwant:\n%s", e.dump(), want)
			}
			if tc.ops == "" && e.dump() != drifted {
				t.Errorf("Repair changed what it must leave:\n%s", e.dump())
			}
		})
	}
}

// TestRepairInSlicesSkipsWhatApplyChanged: Applies between the slices of
// a Repair change what they change, the Repair does not undo them nor
// fail on them, and it still repairs the rest.
func TestRepairInSlicesSkipsWhatApplyChanged(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustResync(plan(repairPlan()...))
	_ = e.k.DeleteVirtualServer(key("192.168.1.10:30080/TCP")) // drift, repaired by a late slice
	if err := e.w.StartRepair(); err != nil {
		t.Fatalf("StartRepair: %v", err)
	}
	done, err := e.w.RepairStep(0, nil) // one virtual server: 10.96.0.1:80
	if err != nil || done {
		t.Fatalf("first RepairStep: done %t, %v", done, err)
	}
	// Between slices: a new service, one removed, one changed.
	e.mustApply(svc("d", vs("ClusterIP 10.96.0.4:80/TCP", "10.244.1.4:80")), svc("b"),
		svc("a", vs("ClusterIP 10.96.0.1:80/TCP", "10.244.1.1:8080")))
	steps := 1
	for !done {
		e.advance(time.Second)
		if done, err = e.w.RepairStep(0, nil); err != nil {
			t.Fatalf("RepairStep: %v", err)
		}
		steps++
	}
	f := newEnv(t, Config{})
	f.mustResync(plan(svc("a", vs("ClusterIP 10.96.0.1:80/TCP", "10.244.1.1:8080")), repairPlan()[2],
		svc("d", vs("ClusterIP 10.96.0.4:80/TCP", "10.244.1.4:80"))))
	if e.dump() != f.dump() {
		t.Errorf("after a Repair in %d slices with Applies between them:\n%s\nwant:\n%s", steps, e.dump(), f.dump())
	}
}

// TestRepairNeedsResync: before the first sync and after a failure that
// leaves the data plane unknown, StartRepair changes nothing and asks
// for a Resync; a Resync abandons a Repair in progress.
func TestRepairNeedsResync(t *testing.T) {
	e := newEnv(t, Config{})
	if err := e.w.StartRepair(); !errors.Is(err, ErrNeedsResync) {
		t.Errorf("StartRepair before the first sync: %v, want ErrNeedsResync", err)
	}
	e.mustResync(plan(repairPlan()...))
	if err := e.w.StartRepair(); err != nil {
		t.Fatalf("StartRepair: %v", err)
	}
	e.mustResync(plan(repairPlan()...))
	if done, err := e.w.RepairStep(time.Hour, nil); !done || err != nil {
		t.Errorf("RepairStep after a Resync: done %t, %v; want done, nil (nothing in progress)", done, err)
	}
	e.fault("list-services", "", errors.New("netlink: boom"))
	if err := e.w.StartRepair(); err == nil || !e.w.NeedsResync() {
		t.Errorf("StartRepair with an unreadable kernel: %v, NeedsResync %t; want an error and true", err, e.w.NeedsResync())
	}
	if err := e.w.StartRepair(); !errors.Is(err, ErrNeedsResync) {
		t.Errorf("StartRepair after the failure: %v, want ErrNeedsResync", err)
	}
}

// TestRepairNoticesTheDummyInterfaceGone: the dummy interface deleted
// during a Repair ends it with ErrLinkChanged, and a Resync is due.
func TestRepairNoticesTheDummyInterfaceGone(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustResync(plan(repairPlan()...))
	if err := e.w.StartRepair(); err != nil {
		t.Fatalf("StartRepair: %v", err)
	}
	if err := e.l.DeleteLink(DefaultInterface); err != nil {
		t.Fatal(err)
	}
	var err error
	for done := false; !done; {
		done, err = e.w.RepairStep(time.Hour, nil)
	}
	if !errors.Is(err, ErrLinkChanged) || !e.w.NeedsResync() {
		t.Errorf("Repair with the interface deleted: %v, NeedsResync %t; want ErrLinkChanged and true", err, e.w.NeedsResync())
	}
}

// TestRepairStepEndsWhenItsStopSaysSo: a slice ends after the virtual
// server at which its stop reports true, however much budget is left,
// so that a change queued meanwhile waits for one virtual server, not a
// whole slice; without a stop the budget alone ends it.
func TestRepairStepEndsWhenItsStopSaysSo(t *testing.T) {
	always := func() bool { return true }
	for _, tc := range []struct {
		name   string
		budget time.Duration
		stop   func() bool
		want   int // slices, the addresses' included
	}{
		{name: "a stop that says so ends each slice after one virtual server", budget: time.Hour, stop: always, want: len(repairPlan()) + 1},
		{name: "without a stop, the budget ends the slice", budget: time.Hour, want: 2},
		{name: "a stop that never says so leaves it to the budget", budget: time.Hour, stop: func() bool { return false }, want: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.mustResync(plan(repairPlan()...))
			if err := e.w.StartRepair(); err != nil {
				t.Fatalf("StartRepair: %v", err)
			}
			steps := 0
			for done := false; !done; steps++ {
				var err error
				if done, err = e.w.RepairStep(tc.budget, tc.stop); err != nil {
					t.Fatalf("RepairStep: %v", err)
				}
				if steps > 100 {
					t.Fatal("Repair never done")
				}
			}
			if steps != tc.want {
				t.Errorf("Repair in %d slices, want %d", steps, tc.want)
			}
		})
	}
}
