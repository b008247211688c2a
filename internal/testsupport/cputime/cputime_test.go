package cputime

import (
	"testing"
	"time"
)

// TestProcessGrowsWithWork: CPU time the process spends shows in
// Process, so a benchmark's cpu-ns/op is not zero when its loop works.
func TestProcessGrowsWithWork(t *testing.T) {
	before := Process(t)
	sum := 0
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
		sum++
	}
	if Process(t) <= before {
		t.Fatalf("Process did not grow over 50 ms of a busy loop (%d turns)", sum)
	}
}
