package nft

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// handEdit changes the fake behind the writer's back, in one batch.
func handEdit(t *testing.T, f *Fake, queue func(sets []*nftables.Set, table *nftables.Table)) {
	t.Helper()
	table := &nftables.Table{Family: nftables.TableFamilyINet, Name: TableName}
	queue(newSets(table), table)
	if err := f.Flush(); err != nil {
		t.Fatalf("hand edit: %v", err)
	}
}

func servicePort4(a string, port uint16) []byte {
	return keyBuf(nil).addr(addr(a)).proto(unix.IPPROTO_TCP).port(port)
}

// TestResyncWithNothingChangedSendsNothing: once the mirror is current, a
// Resync or Repair of the same plan reads the table and sends no batch.
func TestResyncWithNothingChangedSendsNothing(t *testing.T) {
	plan := fullPlan()
	w, f := resynced(t, plan)
	want := f.Dump()
	for _, step := range []struct {
		name string
		call func() error
	}{
		{"Resync", func() error { return w.Resync(plan) }},
		{"Repair", w.Repair},
	} {
		if err := step.call(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if st := w.LastResync(); st.Rebuilt || st.Added+st.Deleted != 0 || st.Read == 0 {
			t.Errorf("%s with nothing changed: %+v, want a read and no change", step.name, st)
		}
	}
	if f.Flushes() != 1 || f.Dump() != want {
		t.Errorf("%d flushes after a Resync, a Resync and a Repair with nothing changed, want 1", f.Flushes())
	}
}

// TestResyncRepairsDrift: drift in elements is repaired in place, with
// exactly the element changes needed, in one batch; a table missing or
// not structurally ours, or a failed read, is rebuilt; either way the
// table ends as the plan wants.
func TestResyncRepairsDrift(t *testing.T) {
	for _, tc := range []struct {
		name          string
		drift         func(f *Fake, sets []*nftables.Set, table *nftables.Table)
		repair        bool // Repair, else Resync of the plan
		rebuilt       bool
		reason        string // in LastResync().Reason when rebuilt
		added, delete int
	}{
		{name: "element deleted by hand is added back", drift: func(f *Fake, sets []*nftables.Set, _ *nftables.Table) {
			_ = f.SetDeleteElements(sets[idOf(setServicePorts, familyV4)], []nftables.SetElement{{Key: servicePort4("192.0.2.2", 80)}})
		}, added: 1},
		{name: "element added by hand is deleted", repair: true, drift: func(f *Fake, sets []*nftables.Set, _ *nftables.Table) {
			_ = f.SetAddElements(sets[idOf(setServiceIPs, familyV4)], []nftables.SetElement{{Key: addr("10.96.9.9").AsSlice()}})
		}, delete: 1},
		{name: "verdict changed by hand is replaced", drift: func(f *Fake, sets []*nftables.Set, _ *nftables.Table) {
			s := sets[idOf(setEmptyServices, familyV4)]
			k := servicePort4("10.96.0.50", 80)
			_ = f.SetDeleteElements(s, []nftables.SetElement{{Key: k}})
			_ = f.SetAddElements(s, []nftables.SetElement{{Key: k, VerdictData: &expr.Verdict{Kind: expr.VerdictDrop}}})
		}, added: 1, delete: 1},
		{name: "concatenated interval deleted by hand is added back", repair: true, drift: func(f *Fake, sets []*nftables.Set, _ *nftables.Table) {
			k := servicePort4("192.0.2.1", 443)
			_ = f.SetDeleteElements(sets[idOf(setLBSourceAllowed, familyV4)], []nftables.SetElement{{
				Key: append(append([]byte{}, k...), 203, 0, 113, 7), KeyEnd: append(append([]byte{}, k...), 203, 0, 113, 7)}})
		}, added: 1},
		{name: "table deleted by hand is rebuilt", repair: true, drift: func(f *Fake, _ []*nftables.Set, table *nftables.Table) {
			f.DelTable(table)
		}, rebuilt: true, reason: "table missing"},
		{name: "extra rule is rebuilt", drift: func(f *Fake, _ []*nftables.Set, table *nftables.Table) {
			f.AddRule(&nftables.Rule{Table: table, Chain: &nftables.Chain{Name: chainRawOutput, Table: table}, Exprs: []expr.Any{&expr.Counter{}}})
		}, rebuilt: true, reason: "chain raw-output has 3 rules, want 2"},
		{name: "extra chain is rebuilt", drift: func(f *Fake, _ []*nftables.Set, table *nftables.Table) {
			f.AddChain(&nftables.Chain{Name: "foreign", Table: table})
		}, rebuilt: true, reason: "chain foreign is not one we write"},
		{name: "cluster CIDR deleted by hand is rebuilt", drift: func(f *Fake, sets []*nftables.Set, _ *nftables.Table) {
			_ = f.SetDeleteElements(sets[idOf(setClusterCIDRs, familyV4)], []nftables.SetElement{{Key: addr("10.244.0.0").AsSlice()}})
		}, rebuilt: true, reason: "set cluster-cidrs-v4 has 1 elements, want 2"},
		{name: "failed read is rebuilt", drift: func(f *Fake, _ []*nftables.Set, _ *nftables.Table) {
			f.FailNextRead(unix.EINTR)
		}, rebuilt: true, reason: "read sets: interrupted system call"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := fullPlan()
			w, f := resynced(t, plan)
			want := f.Dump()
			handEdit(t, f, func(sets []*nftables.Set, table *nftables.Table) { tc.drift(f, sets, table) })
			var err error
			if tc.repair {
				err = w.Repair()
			} else {
				err = w.Resync(plan)
			}
			if err != nil {
				t.Fatalf("repair: %v", err)
			}
			st := w.LastResync()
			if st.Rebuilt != tc.rebuilt || st.Added != tc.added || st.Deleted != tc.delete || (tc.rebuilt && !strings.Contains(st.Reason, tc.reason)) {
				t.Errorf("LastResync %+v, want rebuilt %t (%q), %d adds, %d deletes", st, tc.rebuilt, tc.reason, tc.added, tc.delete)
			}
			if got := f.Dump(); got != want {
				t.Errorf("table after the repair differs from the plan's:\n%s", got)
			}
			if !tc.rebuilt && countPrefix(f.LastBatch(), "delete table") != 0 {
				t.Errorf("an in-place repair deleted the table: %q", f.LastBatch())
			}
		})
	}
}

// TestResyncAppliesPlanChanges: a Resync of another plan with the mirror
// current sends only the elements that differ, and the mirror follows, so
// that a later Apply diffs against the new plan.
func TestResyncAppliesPlanChanges(t *testing.T) {
	w, f := resynced(t, fullPlan())
	next := fullPlan()
	next.VirtualServers = next.VirtualServers[1:] // drops one virtual server
	if err := w.Resync(next); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	if st := w.LastResync(); st.Rebuilt || st.Deleted == 0 || st.Added != 0 {
		t.Errorf("Resync of a smaller plan: %+v, want deletes in place", st)
	}
	_, fresh := resynced(t, next)
	if f.Dump() != fresh.Dump() {
		t.Errorf("diffed Resync differs from a fresh one")
	}
	if err := w.Apply([]policy.ServicePlan{{Service: key("shop/a")}}); err != nil {
		t.Fatalf("Apply after the diffed Resync: %v", err)
	}
}

// TestRepairNeedsResyncFirst: before the first Resync, and after a
// failure, Repair changes nothing and asks for a Resync; a refused drift
// batch falls back to a rebuild in the same call.
func TestRepairNeedsResyncFirst(t *testing.T) {
	f := NewFake()
	w := New(testConfig, f)
	if err := w.Repair(); !errors.Is(err, ErrNeedsResync) || f.Flushes() != 0 {
		t.Errorf("Repair before Resync: %v, %d flushes; want ErrNeedsResync and none", err, f.Flushes())
	}
	plan := fullPlan()
	if err := w.Resync(plan); err != nil {
		t.Fatal(err)
	}
	want := f.Dump()
	handEdit(t, f, func(sets []*nftables.Set, _ *nftables.Table) {
		_ = f.SetDeleteElements(sets[idOf(setServicePorts, familyV4)], []nftables.SetElement{{Key: servicePort4("192.0.2.2", 80)}})
	})
	f.FailNextFlush(unix.ENOBUFS) // the drift batch; the rebuild goes through
	if err := w.Repair(); err != nil {
		t.Fatalf("Repair with a refused drift batch: %v", err)
	}
	if st := w.LastResync(); !st.Rebuilt || !strings.Contains(st.Reason, "no buffer space") || f.Dump() != want {
		t.Errorf("Repair with a refused drift batch: %+v, want a rebuild restoring the table", st)
	}
}

// TestRepairStepEndsWhenItsStopSaysSo: a slice ends after the set at
// which its stop reports true, however much budget is left.
func TestRepairStepEndsWhenItsStopSaysSo(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func() bool
		want int
	}{
		{name: "a stop that says so ends each slice after one set", stop: func() bool { return true }, want: numSets()},
		{name: "without a stop, the budget ends the slice", want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, _ := resynced(t, fullPlan())
			if err := w.StartRepair(); err != nil {
				t.Fatalf("StartRepair: %v", err)
			}
			steps := 0
			for done := false; !done; steps++ {
				var err error
				if done, err = w.RepairStep(time.Hour, tc.stop); err != nil {
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

// TestRepairInSlices: a Repair made set by set, with Applies between the
// slices, repairs the drift and leaves the table as the plan with the
// Applies wants.
func TestRepairInSlices(t *testing.T) {
	plan := fullPlan()
	w, f := resynced(t, plan)
	handEdit(t, f, func(sets []*nftables.Set, _ *nftables.Table) {
		_ = f.SetDeleteElements(sets[idOf(setServicePorts, familyV4)], []nftables.SetElement{{Key: servicePort4("192.0.2.2", 80)}})
		_ = f.SetAddElements(sets[idOf(setServiceIPs, familyV6)], []nftables.SetElement{{Key: addr("fd00:96::99").AsSlice()}})
	})
	if err := w.StartRepair(); err != nil {
		t.Fatalf("StartRepair: %v", err)
	}
	steps := 0
	for done := false; !done; steps++ {
		var err error
		if done, err = w.RepairStep(0, nil); err != nil {
			t.Fatalf("RepairStep: %v", err)
		}
		if steps == 3 { // an Apply between slices: default/web goes
			if err := w.Apply([]policy.ServicePlan{{Service: key("default/web")}}); err != nil {
				t.Fatalf("Apply between slices: %v", err)
			}
		}
	}
	if steps != numSets() {
		t.Errorf("%d slices of budget 0, want one per set (%d)", steps, numSets())
	}
	if st := w.LastResync(); st.Rebuilt || st.Added != 1 || st.Deleted != 1 {
		t.Errorf("Repair in slices: %+v, want 1 add and 1 delete in place", st)
	}
	next := fullPlan()
	next.VirtualServers = slices.DeleteFunc(next.VirtualServers, func(v policy.VirtualServer) bool { return v.Service == key("default/web") })
	_, fresh := resynced(t, next)
	if f.Dump() != fresh.Dump() {
		t.Errorf("table after the Repair in slices and the Apply differs from the plan's")
	}
}
