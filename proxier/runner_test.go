package proxier

import (
	"context"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestScheduleNext(t *testing.T) {
	const minInterval = time.Second
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	tests := []struct {
		name string
		s    schedule
		want time.Time
	}{
		{"never run, requested: at once",
			schedule{periodicAt: at(30 * time.Second), pending: true}, time.Time{}.Add(minInterval)}, // long past,
		{"never run, not requested: the periodic deadline",
			schedule{periodicAt: at(30 * time.Second)}, at(30 * time.Second)},
		{"requested: min interval after the last end",
			schedule{lastEnd: at(0), periodicAt: at(30 * time.Second), pending: true}, at(time.Second)},
		{"failed: the retry time",
			schedule{lastEnd: at(0), periodicAt: at(30 * time.Second), retryAt: at(10 * time.Second)}, at(10 * time.Second)},
		{"failed, retry after the periodic deadline: the deadline",
			schedule{lastEnd: at(0), periodicAt: at(5 * time.Second), retryAt: at(10 * time.Second)}, at(5 * time.Second)},
		{"periodic deadline within the min interval: the min interval",
			schedule{lastEnd: at(0), periodicAt: at(500 * time.Millisecond)}, at(time.Second)},
		{"retry within the min interval: the min interval",
			schedule{lastEnd: at(0), periodicAt: at(30 * time.Second), retryAt: at(100 * time.Millisecond)}, at(time.Second)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s.next(minInterval); !got.Equal(tc.want) {
				t.Errorf("next = %v, want %v", got, tc.want)
			}
		})
	}
}

// runnerHarness runs a runner on a fake clock. The loop reports each time
// it blocks; the test acts only then, so every step is deterministic.
type runnerHarness struct {
	t     *testing.T
	clk   *testingclock.FakeClock
	r     *runner
	calls chan bool // periodic flag of each call
	gate  chan struct{}
	err   error
	next  time.Time // what the function returns as its next call time
}

func newRunnerHarness(t *testing.T, minInterval, maxInterval, retry time.Duration) *runnerHarness {
	h := &runnerHarness{t: t, clk: testingclock.NewFakeClock(t0), calls: make(chan bool, 100)}
	h.r = newRunner(func(periodic bool) (time.Time, error) {
		h.calls <- periodic
		if h.gate != nil {
			<-h.gate
		}
		return h.next, h.err
	}, minInterval, maxInterval, retry, h.clk)
	h.r.idle = make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.r.Loop(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

// idle waits for the loop to block and checks its wake-up time.
func (h *runnerHarness) idle(want time.Duration) {
	h.t.Helper()
	select {
	case got := <-h.r.idle:
		if !got.Equal(t0.Add(want)) {
			h.t.Fatalf("loop waits until t0+%v, want t0+%v", got.Sub(t0), want)
		}
	case <-time.After(10 * time.Second):
		h.t.Fatal("loop did not block")
	}
}

// called checks the calls made since the last check.
func (h *runnerHarness) called(want ...bool) {
	h.t.Helper()
	var got []bool
	for len(h.calls) > 0 {
		got = append(got, <-h.calls)
	}
	if len(got) != len(want) {
		h.t.Fatalf("calls (periodic flags): got %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			h.t.Fatalf("calls (periodic flags): got %v, want %v", got, want)
		}
	}
}

func TestRunnerBounds(t *testing.T) {
	h := newRunnerHarness(t, time.Second, 30*time.Second, 10*time.Second)
	h.idle(30 * time.Second)

	t.Run("the first request runs at once", func(t *testing.T) {
		h.r.Run()
		h.idle(30 * time.Second)
		h.called(false)
	})
	t.Run("a request waits for the min interval", func(t *testing.T) {
		h.r.Run()
		h.idle(time.Second)
		h.clk.Step(500 * time.Millisecond)
		h.called()
		h.clk.Step(500 * time.Millisecond)
		h.idle(30 * time.Second)
		h.called(false)
	})
	t.Run("the max interval makes a periodic call", func(t *testing.T) {
		h.clk.Step(29 * time.Second)
		h.idle(60 * time.Second)
		h.called(true)
	})
	t.Run("requests do not postpone the periodic call", func(t *testing.T) {
		for _, at := range []time.Duration{40, 50} {
			h.clk.SetTime(t0.Add(at * time.Second))
			h.r.Run()
			h.idle(60 * time.Second)
			h.called(false)
		}
		h.clk.SetTime(t0.Add(60 * time.Second))
		h.idle(90 * time.Second)
		h.called(true)
	})
	t.Run("a failed call is retried after the retry interval", func(t *testing.T) {
		h.err = errBoom
		h.r.Run()
		h.idle(61 * time.Second)
		h.clk.Step(time.Second)
		h.idle(71 * time.Second) // the retry
		h.called(false)
		h.err = nil
		h.clk.Step(10 * time.Second)
		h.idle(90 * time.Second)
		h.called(false)
	})
}

// TestRunnerRetriesFailuresWithBackoff: a failing call is retried without
// a request after 1 s, 2 s, 4 s, ... at most the max interval, and the
// backoff starts over after a success.
func TestRunnerRetriesFailuresWithBackoff(t *testing.T) {
	h := newRunnerHarness(t, 0, time.Hour, time.Second)
	h.idle(time.Hour)
	h.err = errBoom
	h.r.Run()
	at := time.Duration(0)
	backoffs := []time.Duration{1, 2, 4, 8, 16}
	for i, backoff := range backoffs {
		h.idle(at + backoff*time.Second)
		h.called(false)
		at += backoff * time.Second
		if i == len(backoffs)-1 {
			// The retry this SetTime wakes succeeds. Say so while the
			// loop is blocked, not while its call may be reading h.err.
			h.err = nil
		}
		h.clk.SetTime(t0.Add(at))
	}
	h.idle(time.Hour) // that retry succeeded: only the periodic call is left
	h.called(false)
	h.err = errBoom
	h.r.Run()
	h.idle(at + time.Second) // the backoff starts over
	h.called(false)
}

// TestRunnerCallsAgainWhenAsked: a call that returns a next time is made
// again then, without a request; the earlier of that and a failure's
// backoff wins.
func TestRunnerCallsAgainWhenAsked(t *testing.T) {
	h := newRunnerHarness(t, 0, time.Hour, time.Second)
	h.idle(time.Hour)
	h.next = t0.Add(5 * time.Second)
	h.r.Run()
	h.idle(5 * time.Second)
	h.called(false)
	h.next = time.Time{}
	h.clk.SetTime(t0.Add(5 * time.Second))
	h.idle(time.Hour)
	h.called(false)
	// Failed, and asks to be called at once: at once, not after 1 s; if
	// that fails too, the backoff wins (2 s), so it cannot spin.
	h.err, h.next = errBoom, t0.Add(5*time.Second)
	h.r.Run()
	h.idle(7 * time.Second)
	h.called(false, false)
}

// TestRunnerProbesWhileIdle: while idle the probe runs every probe
// interval; when it reports trouble a call is made at once.
func TestRunnerProbesWhileIdle(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	calls, probes := make(chan bool, 10), 0
	trouble := false
	r := newRunner(func(periodic bool) (time.Time, error) { calls <- periodic; return time.Time{}, nil },
		0, time.Hour, time.Second, clk)
	r.withProbe(time.Second, func() bool { probes++; return trouble })
	r.idle = make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Loop(ctx) }()
	defer func() { cancel(); <-done }()
	wantIdle := func(d time.Duration) {
		t.Helper()
		if got := <-r.idle; !got.Equal(t0.Add(d)) {
			t.Fatalf("loop waits until t0+%v, want t0+%v", got.Sub(t0), d)
		}
	}
	wantIdle(time.Second)
	clk.SetTime(t0.Add(time.Second))
	wantIdle(2 * time.Second)
	if probes != 1 || len(calls) != 0 {
		t.Fatalf("%d probes, %d calls; want 1 probe, no call", probes, len(calls))
	}
	trouble = true
	clk.SetTime(t0.Add(2 * time.Second))
	wantIdle(3 * time.Second) // probed, called, next probe a second later
	if probes != 2 || len(calls) != 1 {
		t.Fatalf("%d probes, %d calls; want 2 probes and 1 call", probes, len(calls))
	}
}

func TestRunnerCoalesces(t *testing.T) {
	h := newRunnerHarness(t, time.Second, 30*time.Second, 10*time.Second)
	h.idle(30 * time.Second)
	h.gate = make(chan struct{})
	h.r.Run()
	<-h.calls // the call has started and is blocked on the gate
	for range 3 {
		h.r.Run()
	}
	h.gate <- struct{}{}
	h.idle(30 * time.Second) // back from the call, no request seen yet
	h.idle(time.Second)      // the three requests, as one
	h.clk.Step(time.Second)
	<-h.calls
	h.gate <- struct{}{}
	h.idle(30 * time.Second) // nothing pending any more
	h.called()
}

func TestRunnerZeroMinInterval(t *testing.T) {
	h := newRunnerHarness(t, 0, 30*time.Second, 30*time.Second)
	h.idle(30 * time.Second)
	for range 3 {
		h.r.Run()
		h.idle(30 * time.Second)
		h.called(false)
	}
}
