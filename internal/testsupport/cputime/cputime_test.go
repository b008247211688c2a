package cputime

import "testing"

// TestProcessGrowsWithWork: CPU time the process spends shows in
// Process, so a benchmark's cpu-ns/op is not zero when its loop works.
func TestProcessGrowsWithWork(t *testing.T) {
	before := Process(t)
	sum := 0
	for i := 0; Process(t) == before && i < 1<<30; i++ {
		sum += i
	}
	if Process(t) <= before {
		t.Fatalf("Process did not grow after a busy loop (sum %d)", sum)
	}
}
