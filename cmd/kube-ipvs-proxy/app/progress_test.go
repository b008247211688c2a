package app

import (
	"strings"
	"testing"
	"time"
)

// TestProgressOnSlowDryRuns: a dry run longer than the threshold says on
// stderr that it is still working, and when it is done; a quick one says
// nothing.
func TestProgressOnSlowDryRuns(t *testing.T) {
	tests := []struct {
		name      string
		work      time.Duration
		wantLines []string
		wantEmpty bool
	}{
		{name: "a quick dry run prints nothing", work: 0, wantEmpty: true},
		{name: "a slow dry run reports progress, then done", work: 250 * time.Millisecond,
			wantLines: []string{"dry run: still loading the objects and computing the plan", "dry run: done in"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf syncBuffer
			stop := startProgress(&buf, 100*time.Millisecond, 50*time.Millisecond)
			time.Sleep(tc.work)
			stop()
			out := buf.String()
			if tc.wantEmpty && out != "" {
				t.Errorf("printed %q, want nothing", out)
			}
			for _, w := range tc.wantLines {
				if !strings.Contains(out, w) {
					t.Errorf("stderr lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
