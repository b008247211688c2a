package nft

import (
	"errors"
	"testing"
	"time"

	"github.com/google/nftables"
)

// countingConn counts Check's kernel reads (the probe set by name).
type countingConn struct {
	*Fake
	reads int
}

func (c *countingConn) GetSetByName(t *nftables.Table, name string) (*nftables.Set, error) {
	c.reads++
	return c.Fake.GetSetByName(t, name)
}

// TestApplyReadsTheKernelAtMostOncePerSecondWhenEditsAreWatched: with
// foreign edits watched, Apply reads the kernel only when the last read
// (its own or a Check's) is applyCheckEvery old, but takes a foreign
// edit on every call; Check always reads; without edits watched, every
// Apply reads.
func TestApplyReadsTheKernelAtMostOncePerSecondWhenEditsAreWatched(t *testing.T) {
	type step struct {
		at       time.Duration // on the writer's clock
		call     string        // "apply" or "check"
		edit     bool          // a foreign edit is collected before the call
		wantRead bool
		wantErr  error
	}
	for _, tc := range []struct {
		name    string
		watched bool
		steps   []step
	}{
		{"watched: the first Apply reads, the next within a second do not", true, []step{
			{at: 0, call: "apply", wantRead: true},
			{at: 300 * time.Millisecond, call: "apply"},
			{at: 999 * time.Millisecond, call: "apply"},
			{at: time.Second, call: "apply", wantRead: true},
		}},
		{"watched: Check always reads, and its read counts for Apply", true, []step{
			{at: 0, call: "apply", wantRead: true},
			{at: 200 * time.Millisecond, call: "check", wantRead: true},
			{at: 400 * time.Millisecond, call: "check", wantRead: true},
			{at: 1300 * time.Millisecond, call: "apply"},
			{at: 1400 * time.Millisecond, call: "apply", wantRead: true},
		}},
		{"watched: a foreign edit is reported within the second", true, []step{
			{at: 0, call: "apply", wantRead: true},
			{at: 100 * time.Millisecond, call: "apply", edit: true, wantErr: ErrNeedsResync},
		}},
		{"not watched: every Apply reads", false, []step{
			{at: 0, call: "apply", wantRead: true},
			{at: 10 * time.Millisecond, call: "apply", wantRead: true},
			{at: 20 * time.Millisecond, call: "apply", wantRead: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, f := resynced(t, fullPlan())
			c := &countingConn{Fake: f}
			w.conn = c
			edits := NewForeignEdits(TableName, "kube-ipvs-proxy")
			if tc.watched {
				w.WatchEdits(edits)
			}
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			var now time.Time
			w.now = func() time.Time { return now }
			for i, s := range tc.steps {
				now = start.Add(s.at)
				if s.edit {
					edits.note("delete element by nft")
				}
				before := c.reads
				var err error
				if s.call == "apply" {
					err = w.Apply(nil)
				} else {
					err = w.Check()
				}
				if !errors.Is(err, s.wantErr) || (s.wantErr == nil && err != nil) {
					t.Errorf("step %d (%s at %v): %v, want %v", i, s.call, s.at, err, s.wantErr)
				}
				if read := c.reads > before; read != s.wantRead {
					t.Errorf("step %d (%s at %v): read the kernel %v, want %v", i, s.call, s.at, read, s.wantRead)
				}
			}
		})
	}
}
