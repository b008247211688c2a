package ipvs

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// gatedReader is a RepairReader over the same fake kernel whose services
// dump takes its snapshot when it starts, says so on taken, and returns
// it when release is closed: a dump that Applies run beside.
type gatedReader struct {
	*FakeKernel
	taken   chan struct{}
	release chan struct{}
	drop    Key   // left out of the dump, as a dump resumed by position can
	err     error // returned in place of the dump
}

func (g *gatedReader) VirtualServers() ([]VirtualServer, error) {
	vss, err := g.FakeKernel.VirtualServers()
	close(g.taken)
	<-g.release
	if g.err != nil {
		return nil, g.err
	}
	return slices.DeleteFunc(vss, func(vs VirtualServer) bool { return vs.Key == g.drop }), err
}

// newReaderEnv is an env whose Writer dumps on a gatedReader.
func newReaderEnv(t *testing.T) (*env, *gatedReader) {
	t.Helper()
	e := newEnv(t, Config{})
	g := &gatedReader{FakeKernel: e.k, taken: make(chan struct{}), release: make(chan struct{})}
	e.cfg.RepairReader = g
	e.restart()
	e.mustResync(plan(repairPlan()...))
	return e, g
}

// repairToEnd runs RepairStep until done.
func repairToEnd(t *testing.T, e *env) {
	t.Helper()
	for i := 0; ; i++ {
		done, err := e.w.RepairStep(time.Hour, nil)
		if err != nil {
			t.Fatalf("RepairStep: %v", err)
		}
		if done {
			return
		}
		if i > 100 {
			t.Fatal("Repair never done")
		}
	}
}

// TestRepairReaderDumpDoesNotHoldUpApply: with a RepairReader, the
// services dump runs in the background: RepairStep returns not done
// while it runs, Applies go through meanwhile, and the Repair then
// leaves what they changed alone (the dump predates them) and repairs
// the rest.
func TestRepairReaderDumpDoesNotHoldUpApply(t *testing.T) {
	e, g := newReaderEnv(t)
	_ = e.k.DeleteVirtualServer(key("192.168.1.10:30080/TCP")) // drift, before the dump
	if err := e.w.StartRepair(); err != nil {
		t.Fatalf("StartRepair: %v", err)
	}
	<-g.taken
	if done, err := e.w.RepairStep(10*time.Millisecond, nil); done || err != nil {
		t.Fatalf("RepairStep during the dump: done %t, %v; want not done, nil", done, err)
	}
	// During the dump: a new service, one removed, one changed.
	e.mustApply(svc("d", vs("ClusterIP 10.96.0.4:80/TCP", "10.244.1.4:80")), svc("b"),
		svc("a", vs("ClusterIP 10.96.0.1:80/TCP", "10.244.1.1:8080")))
	close(g.release)
	ops := e.opsDelta(func() { repairToEnd(t, e) })
	if got := opsString(ops); got != "add-destination=1 add-service=1" {
		t.Errorf("Repair made ops %q, want only the drift's (add-destination=1 add-service=1)", got)
	}
	f := newEnv(t, Config{})
	f.mustResync(plan(svc("a", vs("ClusterIP 10.96.0.1:80/TCP", "10.244.1.1:8080")), repairPlan()[2],
		svc("d", vs("ClusterIP 10.96.0.4:80/TCP", "10.244.1.4:80"))))
	if e.dump() != f.dump() {
		t.Errorf("after a Repair whose dump ran beside Applies:\n%s\nwant:\n%s", e.dump(), f.dump())
	}
}

// TestRepairReaderConfirmsWhatTheDumpMissed: a virtual server missing
// from a dump that ran beside Applies is read alone before it is believed
// gone: one that exists is left alone, one really deleted is re-added.
func TestRepairReaderConfirmsWhatTheDumpMissed(t *testing.T) {
	for _, tc := range []struct {
		name      string
		deleteToo bool
		ops       string
	}{
		{name: "missed by the dump, still there: no change", ops: ""},
		{name: "missed by the dump because it is gone: re-added", deleteToo: true, ops: "add-destination=2 add-service=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, g := newReaderEnv(t)
			want := e.dump()
			g.drop = key("10.96.0.1:80/TCP")
			if tc.deleteToo {
				_ = e.k.DeleteVirtualServer(g.drop)
			}
			close(g.release)
			if err := e.w.StartRepair(); err != nil {
				t.Fatalf("StartRepair: %v", err)
			}
			ops := e.opsDelta(func() { repairToEnd(t, e) })
			if got := opsString(ops); got != tc.ops {
				t.Errorf("Repair made ops %q, want %q", got, tc.ops)
			}
			if e.dump() != want {
				t.Errorf("after Repair:\n%s\nwant:\n%s", e.dump(), want)
			}
		})
	}
}

// TestRepairReaderFailures: a failed background dump ends the Repair and
// asks for a Resync; a Resync abandons a Repair whose dump is under way,
// and the next Repair dumps again.
func TestRepairReaderFailures(t *testing.T) {
	t.Run("a failed dump asks for a Resync", func(t *testing.T) {
		e, g := newReaderEnv(t)
		g.err = errors.New("netlink: boom")
		close(g.release)
		if err := e.w.StartRepair(); err != nil {
			t.Fatalf("StartRepair: %v", err)
		}
		done, err := e.w.RepairStep(time.Hour, nil)
		if !done || err == nil || !e.w.NeedsResync() {
			t.Errorf("RepairStep after a failed dump: done %t, %v, NeedsResync %t; want done, an error, true", done, err, e.w.NeedsResync())
		}
	})
	t.Run("a Resync abandons a dump under way", func(t *testing.T) {
		e, g := newReaderEnv(t)
		if err := e.w.StartRepair(); err != nil {
			t.Fatalf("StartRepair: %v", err)
		}
		<-g.taken
		e.mustResync(plan(repairPlan()...))
		if done, err := e.w.RepairStep(10*time.Millisecond, nil); !done || err != nil {
			t.Errorf("RepairStep after a Resync: done %t, %v; want done, nil", done, err)
		}
		g.taken = make(chan struct{})
		close(g.release) // the abandoned dump ends; the next one runs after it
		if err := e.w.StartRepair(); err != nil {
			t.Fatalf("StartRepair: %v", err)
		}
		repairToEnd(t, e)
	})
}

// TestRepairStepWaitingForTheDumpGivesWay: a slice that waits for the
// background services dump returns, not done, once its stop reports
// true, however much budget is left.
func TestRepairStepWaitingForTheDumpGivesWay(t *testing.T) {
	e, g := newReaderEnv(t)
	defer close(g.release)
	if err := e.w.StartRepair(); err != nil {
		t.Fatalf("StartRepair: %v", err)
	}
	<-g.taken
	asked := 0
	returned := make(chan error, 1)
	go func() {
		done, err := e.w.RepairStep(time.Hour, func() bool { asked++; return asked >= 3 })
		if done {
			err = errors.Join(err, errors.New("done"))
		}
		returned <- err
	}()
	select {
	case err := <-returned:
		if err != nil {
			t.Errorf("RepairStep: %v; want not done, nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RepairStep waited for the dump although its stop said so")
	}
}
