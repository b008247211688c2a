package proxier

import (
	"runtime"
	"sync"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// TestStopWaitsForTheInformersAtMostInformerStopWait: Run, stopping,
// waits for its informers to end, but not beyond informerStopWait: a
// reflector backing off from an unreachable API server notices the stop
// only when its backoff ends. The wait is on the fake clock.
func TestStopWaitsForTheInformersAtMostInformerStopWait(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  bool          // the informers end without the clock moving
		step time.Duration // else: how far the clock moves
		want bool          // Run stopped waiting
	}{
		{name: "informers that end are waited for", end: true, want: true},
		{name: "informers still running are waited for until informerStopWait", step: informerStopWait - time.Nanosecond},
		{name: "informers still running are left once informerStopWait has passed", step: informerStopWait, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTestProxier(t, nil)
			clk := testingclock.NewFakeClock(t0)
			tp.setClock(clk)
			set := &informerSet{}
			set.wg.Add(1) // an informer that has not ended
			var once sync.Once
			end := func() { once.Do(set.wg.Done) }
			t.Cleanup(end)
			stopped := make(chan struct{})
			go func() {
				tp.stopInformers(set)
				close(stopped)
			}()
			awaitTimers(t, clk, 1) // stopInformers waits, its bound set
			if tc.end {
				end()
			} else {
				clk.Step(tc.step)
			}
			// The bound's timer fires in Step or not at all; with it
			// still set and the informer running, the wait goes on.
			if !tc.want {
				if clk.Waiters() != 1 {
					t.Errorf("the wait's bound fired %v after the stop, want not before %v", tc.step, informerStopWait)
				}
				return
			}
			select {
			case <-stopped:
			case <-time.After(10 * time.Second):
				t.Fatal("still waiting for the informers 10 s (real) later")
			}
		})
	}
}

// awaitTimers waits until n timers are set on clk: the marker that a
// goroutine waiting on the fake clock has done all that the last Step
// made due and waits again. The real-clock bound only turns a hang into
// a failure.
func awaitTimers(t *testing.T, clk *testingclock.FakeClock, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for clk.Waiters() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d timers set on the fake clock, want %d", clk.Waiters(), n)
		}
		runtime.Gosched()
	}
}
