package proxier

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// repairRules: after the initial Resync, one step and one periodic sync
// (then, if next, one incremental sync); want is the data plane calls
// after the initial Resync.
var repairRules = []struct {
	name   string
	minSP  time.Duration
	step   func(tp *testProxier, dp *repairingDataPlane)
	next   bool
	want   []string
	failed bool // the periodic sync fails
}{
	{name: "a periodic sync is a repair in slices, not a Resync of a recomputed plan",
		want: []string{"StartRepair", "RepairStep", "RepairStep", "RepairStep"}},
	{name: "a change queued during a repair is applied between two slices",
		step: func(tp *testProxier, dp *repairingDataPlane) {
			dp.onStep = func(step int) {
				if step == 1 {
					tp.slice(slice("web-1", "web", ep{"10.244.1.5", testNode}, ep{"10.244.1.6", "node-b"}))
				}
			}
		},
		want: []string{"StartRepair", "RepairStep", "Apply default/web[2]", "RepairStep", "RepairStep"}},
	{name: "MinSyncPeriod holds a change queued during a repair until after it",
		minSP: time.Hour,
		step: func(tp *testProxier, dp *repairingDataPlane) {
			dp.onStep = func(step int) {
				if step == 1 {
					tp.delSlice("db-1")
				}
			}
		},
		next: true,
		want: []string{"StartRepair", "RepairStep", "RepairStep", "RepairStep", "Apply default/db[1]"}},
	{name: "a failed repair makes the next sync a Resync",
		step:   func(tp *testProxier, dp *repairingDataPlane) { dp.stepErr = errBoom },
		next:   true,
		failed: true,
		want:   []string{"StartRepair", "RepairStep", "Resync[3]"}},
	{name: "a Resync due is made instead of a repair",
		step: func(tp *testProxier, dp *repairingDataPlane) { dp.set(nil, true) },
		want: []string{"Resync[3]"}},
	{name: "a repair stops at its next slice when the proxy is stopping",
		step: func(tp *testProxier, dp *repairingDataPlane) {
			stop := make(chan struct{})
			tp.stopping = stop
			dp.onStep = func(step int) {
				if step == 1 {
					close(stop)
				}
			}
		},
		want: []string{"StartRepair", "RepairStep"}},
	{name: "a repair the data plane refuses to start makes the next sync a Resync",
		step:   func(tp *testProxier, dp *repairingDataPlane) { dp.startErr = errBoom },
		next:   true,
		failed: true,
		want:   []string{"StartRepair", "Resync[3]"}},
}

// repairingProxier is a test proxier over a repairingDataPlane whose
// Repair is slices RepairSteps, after its initial Resync, on a fake clock
// that only the test moves.
func repairingProxier(t *testing.T, slices int, minSyncPeriod time.Duration) (*testProxier, *repairingDataPlane, *testingclock.FakeClock) {
	t.Helper()
	dp := &repairingDataPlane{fakeDataPlane: &fakeDataPlane{}, slices: slices}
	tp := newTestProxier(t, func(c *Config) { c.DataPlane, c.MinSyncPeriod = dp, minSyncPeriod })
	tp.dp = dp.fakeDataPlane
	clk := testingclock.NewFakeClock(t0)
	tp.setClock(clk)
	baseline(tp)
	tp.syncNow(false)
	return tp, dp, clk
}

func TestRepairRules(t *testing.T) {
	for _, tc := range repairRules {
		t.Run(tc.name, func(t *testing.T) {
			tp, dp, _ := repairingProxier(t, 3, tc.minSP)
			before := len(dp.snapshot())
			if tc.step != nil {
				tc.step(tp, dp)
			}
			err := tp.sync(true)
			if (err != nil) != tc.failed {
				t.Errorf("periodic sync: %v, want failed %t", err, tc.failed)
			}
			dp.onStep = nil
			if tc.next {
				tp.syncNow(false)
			}
			if got := describeAll(dp.snapshot()[before:]); !cmp.Equal(got, tc.want) {
				t.Errorf("data plane calls after the initial sync:\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}

// TestPeriodicRepairUndoesDriftWithinOnePeriod: with the real DataPlane
// over fake kernels, one periodic sync restores a virtual server deleted
// by hand and nftables elements lost behind our back (another writer
// rewrote the table without db's), and IPVS and the table end as the
// initial Resync left them; the nftables half is repaired in place.
func TestPeriodicRepairUndoesDriftWithinOnePeriod(t *testing.T) {
	f := newFakes(t)
	tp := newTestProxier(t, func(c *Config) { c.DataPlane = f.dp })
	baseline(tp)
	tp.syncNow(false)
	want := f.kernel.Dump() + f.nft.Dump()
	if err := f.kernel.DeleteVirtualServer(ipvs.Key{Address: netip.MustParseAddr("10.96.0.20"), Protocol: policy.ProtocolTCP, Port: 80}); err != nil {
		t.Fatal(err)
	}
	// Another writer's first Resync rebuilds the whole table.
	other := nft.New(nft.Config{}, f.nft)
	if err := other.Resync(policy.Plan{VirtualServers: slices.DeleteFunc(tp.planNow().VirtualServers,
		func(vs policy.VirtualServer) bool {
			return vs.Service == (policy.ServiceKey{Namespace: "default", Name: "db"})
		})}); err != nil {
		t.Fatal(err)
	}
	if f.kernel.Dump()+f.nft.Dump() == want {
		t.Fatal("the drift changed nothing")
	}
	if err := tp.sync(true); err != nil {
		t.Fatalf("periodic sync: %v", err)
	}
	if got := f.kernel.Dump() + f.nft.Dump(); got != want {
		t.Errorf("after the periodic repair:\n%s\nwant:\n%s", got, want)
	}
	st := tp.Stats()
	if st.Repairs != 1 || st.FullSyncs != 2 || !st.LastFull || f.dp.NeedsResync() {
		t.Errorf("stats %+v, NeedsResync %t; want one repair counted as a full sync, no resync due", st, f.dp.NeedsResync())
	}
	if batch := f.nft.LastBatch(); len(batch) == 0 || strings.Contains(strings.Join(batch, "\n"), "delete table") {
		t.Errorf("the nftables repair was not made in place: %q", batch)
	}
}

// planNow computes the whole current plan from the engine.
func (tp *testProxier) planNow() policy.Plan {
	tp.t.mu.Lock()
	defer tp.t.mu.Unlock()
	plan, _ := tp.t.engine.Compute()
	return plan
}

// TestDataPlaneRepairRules: the DataPlane's Repair is refused before the
// first Resync and when one is due; it runs the nftables half, then the
// IPVS half, each in its own slices, and with nothing changed it changes
// nothing.
func TestDataPlaneRepairRules(t *testing.T) {
	f := newFakes(t)
	if err := f.dp.StartRepair(); err == nil {
		t.Errorf("StartRepair before the first Resync: no error")
	}
	plan := policy.Plan{VirtualServers: webPlan("10.244.1.5").VirtualServers}
	if err := f.dp.Resync(plan); err != nil {
		t.Fatal(err)
	}
	want := f.kernel.Dump() + f.nft.Dump()
	flushes := f.nft.Flushes()
	if err := f.dp.StartRepair(); err != nil {
		t.Fatalf("StartRepair: %v", err)
	}
	steps := 0
	for done := false; !done; steps++ {
		var err error
		if done, err = f.dp.RepairStep(0, nil); err != nil {
			t.Fatalf("RepairStep: %v", err)
		}
	}
	// nftables: one set per slice; IPVS: its start, one virtual server,
	// the addresses.
	if wantSteps := 30 + 3; steps != wantSteps {
		t.Errorf("%d slices of budget 0, want %d", steps, wantSteps)
	}
	if got := f.kernel.Dump() + f.nft.Dump(); got != want || f.nft.Flushes() != flushes {
		t.Errorf("a Repair with nothing changed changed the kernel (%d flushes, was %d)", f.nft.Flushes(), flushes)
	}
}

// TestRepairSliceGivesWayToAChange: a change queued during a slice asks
// the slice to end once RepairSliceShortest has passed, so that it waits
// for about that long, not a whole RepairSlice; not sooner (the repair
// still progresses under steady churn), not without a change, and not
// while MinSyncPeriod holds the change back anyway. The slice's time
// passes on the fake clock.
func TestRepairSliceGivesWayToAChange(t *testing.T) {
	for _, tc := range []struct {
		name   string
		minSP  time.Duration
		change bool
		wait   time.Duration
		want   bool // what the slice's stop says after the change
	}{
		{name: "a change queued once the shortest slice has run ends the slice", change: true, wait: RepairSliceShortest, want: true},
		{name: "a change queued before the shortest slice has run waits for it", change: true, wait: RepairSliceShortest - time.Nanosecond},
		{name: "with no change queued, the slice runs its budget", wait: RepairSliceShortest},
		{name: "a change MinSyncPeriod holds back does not end the slice", minSP: time.Hour, change: true, wait: RepairSliceShortest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp, dp, clk := repairingProxier(t, 2, tc.minSP)
			dp.onStep = func(step int) {
				if step != 1 {
					return
				}
				if tc.change {
					tp.slice(slice("web-1", "web", ep{"10.244.1.5", testNode}, ep{"10.244.1.6", "node-b"}))
				}
				clk.Step(tc.wait)
			}
			if err := tp.sync(true); err != nil {
				t.Fatalf("periodic sync: %v", err)
			}
			if len(dp.stopAsked) == 0 || dp.stopAsked[0] != tc.want {
				t.Errorf("after the first slice the stop said %v, want %t first", dp.stopAsked, tc.want)
			}
		})
	}
}
