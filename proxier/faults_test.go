package proxier

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func webFailure() []ServiceFailure {
	return []ServiceFailure{{Service: key("web"), Reason: "KernelError",
		Err: errors.New("add virtual server 10.96.0.10:80/TCP: no such file or directory")}}
}

// TestServiceFailureIsTheServicesAlone: a failure the data plane confines
// to one service does not fail the sync: health is updated, the next sync
// is incremental, the failure is counted by reason, and a failed
// service's retry, when due, is an Apply even without changes.
func TestServiceFailureIsTheServicesAlone(t *testing.T) {
	tp := newTestProxier(t, nil)
	baseline(tp)
	tp.dp.setFaults(webFailure(), time.Now().Add(time.Hour), nil)
	_, _ = tp.syncOnce(false)
	st := tp.Stats()
	if st.Failures != 0 || st.LastError != nil {
		t.Fatalf("the sync failed: %v", st.LastError)
	}
	if got := tp.seams.get("Updated"); got != 1 {
		t.Errorf("Updated %d times, want 1", got)
	}
	if got := tp.seams.get("ServiceFailure/KernelError"); got != 1 {
		t.Errorf("ServiceFailure(KernelError) %d times, want 1", got)
	}
	tp.seams.mu.Lock()
	if tp.seams.failing != 1 {
		t.Errorf("FailingServices %d, want 1", tp.seams.failing)
	}
	tp.seams.mu.Unlock()

	// The next change is applied incrementally; no retry is due yet.
	tp.delSlice("db-1")
	_, _ = tp.syncOnce(false)
	// The retry is due: an Apply without changes lets the writer retry.
	tp.dp.setFaults(nil, time.Now().Add(-time.Millisecond), nil)
	_, _ = tp.syncOnce(false)
	// Recovered: nothing is due, a sync without changes applies nothing.
	tp.dp.setFaults(nil, time.Time{}, nil)
	_, _ = tp.syncOnce(false)
	got := describeAll(tp.dp.snapshot())
	if want := []string{"Resync[3]", "Apply default/db[1]", "Apply "}; !cmp.Equal(got, want) {
		t.Errorf("data plane calls: got %q, want %q", got, want)
	}
	tp.seams.mu.Lock()
	if tp.seams.failing != 0 {
		t.Errorf("FailingServices %d after recovery, want 0", tp.seams.failing)
	}
	tp.seams.mu.Unlock()
}

// TestServiceFailureEvent: the loop puts one Warning Event on the failing
// Service per distinct error, not one per retry.
func TestServiceFailureEvent(t *testing.T) {
	tp := newTestProxier(t, nil, node(testNode, "192.168.0.10", nil), service("web", "10.96.0.10"),
		slice("web-1", "web", ep{"10.244.1.5", testNode}))
	tp.dp.setFaults(webFailure(), time.Now().Add(20*time.Millisecond), nil)
	tp.start(t)
	waitFor(t, "two retries", func() bool { return tp.seams.get("ServiceFailure/KernelError") >= 3 })
	select {
	case ev := <-tp.rec.Events:
		want := "Warning FailedToProgram node node-a: add virtual server 10.96.0.10:80/TCP: no such file or directory"
		if ev != want {
			t.Errorf("event %q, want %q", ev, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no Event")
	}
	select {
	case ev := <-tp.rec.Events:
		t.Errorf("a second Event for the same error: %q", ev)
	default:
	}
	if st := tp.Stats(); st.FullSyncs != 1 || st.Failures != 0 {
		t.Errorf("%d full syncs, %d failures; want 1 and 0", st.FullSyncs, st.Failures)
	}
}

// TestFailedSyncRetriedWithBackoff: a sync that fails is retried without
// any change, after about a second, as a full resync; at once when the
// failed sync was incremental.
func TestFailedSyncRetriedWithBackoff(t *testing.T) {
	tp := newTestProxier(t, nil, node(testNode, "192.168.0.10", nil), service("web", "10.96.0.10"))
	tp.dp.set(errBoom, true)
	tp.start(t)
	start := time.Now()
	waitFor(t, "the retry", func() bool { return tp.Stats().Syncs >= 2 })
	if d := time.Since(start); d < 500*time.Millisecond || d > 3*time.Second {
		t.Errorf("retried after %v, want about 1 s", d)
	}
	tp.dp.set(nil, false)
	waitFor(t, "a successful retry", func() bool { return tp.Stats().LastError == nil })
	if got := describeAll(tp.dp.snapshot()); strings.Count(strings.Join(got, " "), "Resync") != len(got) {
		t.Errorf("retries: %v, want only Resyncs", got)
	}

	// An incremental sync fails and the data plane asks for a Resync:
	// it follows at once.
	before := len(tp.dp.snapshot())
	tp.dp.mu.Lock()
	tp.dp.err, tp.dp.needsResync, tp.dp.failSetsResync = errBoom, false, true
	tp.dp.mu.Unlock()
	tp.slice(slice("web-1", "web", ep{"10.244.1.5", testNode}))
	waitFor(t, "the failed Apply", func() bool { return len(tp.dp.snapshot()) > before })
	tp.dp.set(nil, true)
	start = time.Now()
	waitFor(t, "the Resync after the failed Apply", func() bool {
		calls := tp.dp.snapshot()
		return len(calls) >= before+2 && calls[len(calls)-1].resync
	})
	if d := time.Since(start); d > 700*time.Millisecond {
		t.Errorf("the Resync came %v after the failed Apply, want at once", d)
	}
}

// TestProbeResyncsWhenKernelObjectsVanish: while idle the loop checks the
// data plane; when the check finds our objects gone, a full resync
// follows at once.
func TestProbeResyncsWhenKernelObjectsVanish(t *testing.T) {
	tp := newTestProxier(t, func(c *Config) { c.ProbeInterval = 20 * time.Millisecond },
		node(testNode, "192.168.0.10", nil), service("web", "10.96.0.10"))
	tp.start(t)
	waitFor(t, "probes", func() bool {
		tp.dp.mu.Lock()
		defer tp.dp.mu.Unlock()
		return tp.dp.checks >= 3
	})
	if n := tp.Stats().Syncs; n != 1 {
		t.Fatalf("%d syncs while nothing changed, want 1", n)
	}
	tp.dp.setFaults(nil, time.Time{}, errBoom) // the check sets NeedsResync
	waitFor(t, "the resync", func() bool { return tp.Stats().FullSyncs >= 2 })
	tp.dp.setFaults(nil, time.Time{}, nil)
	tp.dp.set(nil, false)
	if got := describeAll(tp.dp.snapshot())[1]; got != "Resync[1]" {
		t.Errorf("after the failed check: %s, want Resync[1]", got)
	}
}

// TestServiceFailureCountedOncePerCall: a sync that calls no data plane
// (a change that alters no virtual server) reports no failure again.
func TestServiceFailureCountedOncePerCall(t *testing.T) {
	tp := newTestProxier(t, nil)
	baseline(tp)
	tp.dp.setFaults(webFailure(), time.Now().Add(time.Hour), nil)
	_, _ = tp.syncOnce(false)
	s := slice("db-1", "db", ep{"10.244.2.5", "node-b"})
	s.Annotations = map[string]string{"example.com/note": "x"} // changes no virtual server
	tp.slice(s)
	_, _ = tp.syncOnce(false)
	if got := len(tp.dp.snapshot()); got != 1 {
		t.Fatalf("%d data plane calls, want the first only", got)
	}
	if got := tp.seams.get("ServiceFailure/KernelError"); got != 1 {
		t.Errorf("ServiceFailure(KernelError) %d times, want 1", got)
	}
}
