package cputime

import (
	"syscall"
	"testing"
	"time"
)

// Start reads the process's CPU time; the function it returns, called
// after the benchmark loop, reports the CPU time since then per
// iteration as the metric "cpu-ns/op".
func Start(b *testing.B) (report func()) {
	b.Helper()
	start := Process(b)
	return func() {
		b.Helper()
		b.ReportMetric(float64(Process(b)-start)/float64(b.N), "cpu-ns/op")
	}
}

// Process is the process's user and system CPU time so far.
func Process(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
