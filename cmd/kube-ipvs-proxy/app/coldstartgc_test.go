package app

import (
	"runtime/debug"
	"testing"
)

// TestColdStartGCUntilRestored: the cold start's GC target holds until
// restore, which puts the previous one back; a GOGC in the environment
// is the operator's and is left alone.
func TestColdStartGCUntilRestored(t *testing.T) {
	const before = 180
	for _, tc := range []struct {
		name      string
		gogc      string // "" leaves GOGC unset
		wantStart int
	}{
		{name: "cold start target without GOGC", wantStart: coldStartGCPercent},
		{name: "GOGC set: left alone", gogc: "180", wantStart: before},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.gogc != "" {
				t.Setenv("GOGC", tc.gogc)
			}
			prev := debug.SetGCPercent(before)
			defer debug.SetGCPercent(prev)
			restore := coldStartGC()
			if got := debug.SetGCPercent(-1); got != tc.wantStart {
				t.Errorf("GC percent during the cold start: %d, want %d", got, tc.wantStart)
			}
			debug.SetGCPercent(tc.wantStart)
			restore()
			if got := debug.SetGCPercent(before); got != before {
				t.Errorf("GC percent after restore: %d, want %d", got, before)
			}
		})
	}
}
