package app

import (
	"runtime"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// TestProgressOnSlowDryRuns: a dry run still going after progressAfter
// says on stderr that it is still working, again every progressEvery,
// and when it is done; one stopped sooner says nothing.
func TestProgressOnSlowDryRuns(t *testing.T) {
	const (
		still = "kube-ipvs-proxy: dry run: still loading the objects and computing the plan "
		done  = "kube-ipvs-proxy: dry run: done in "
	)
	tests := []struct {
		name  string
		steps []time.Duration // the fake clock's steps before the stop
		want  string
	}{
		{name: "a dry run stopped just before the threshold prints nothing",
			steps: []time.Duration{progressAfter - time.Nanosecond}},
		{name: "a dry run reaching the threshold says it is still working, then done",
			steps: []time.Duration{progressAfter},
			want:  still + "(3s so far)\n" + done + "3s\n"},
		{name: "it says so again every interval",
			steps: []time.Duration{progressAfter, progressEvery},
			want:  still + "(3s so far)\n" + still + "(8s so far)\n" + done + "8s\n"},
		{name: "not before the next interval has passed",
			steps: []time.Duration{progressAfter, progressEvery - time.Nanosecond},
			want:  still + "(3s so far)\n" + done + "8s\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf syncBuffer
			clk := testingclock.NewFakeClock(time.Unix(1000, 0))
			stop := startProgress(&buf, clk, progressAfter, progressEvery)
			awaitTimers(t, clk, 1) // its timer is set
			for _, d := range tc.steps {
				clk.Step(d)
				// The reporter has written what this step made due and
				// set its timer again (or its timer had not fired).
				awaitTimers(t, clk, 1)
			}
			stop()
			if got := buf.String(); got != tc.want {
				t.Errorf("stderr:\n%q\nwant:\n%q", got, tc.want)
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
