//go:build integration

package labnet

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"
)

// ScaleServices is the number of services of the scale tests:
// KIP_SCALE_SERVICES, default def (kept small so that `make integration`
// stays quick; the measurements of BENCHMARKS.md use 5000).
func ScaleServices(t testing.TB, def int) int {
	t.Helper()
	s := os.Getenv("KIP_SCALE_SERVICES")
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > 65000 {
		t.Fatalf("KIP_SCALE_SERVICES=%q: want a number from 1 to 65000", s)
	}
	return n
}

// Profiled runs fn and, when KIP_PPROF=1, prints its CPU profile to the
// console, base64 between PPROF-BEGIN and PPROF-END lines (the VM lab
// brings no files back; decode the lines and read them with go tool pprof).
func Profiled(t testing.TB, name string, fn func()) time.Duration {
	t.Helper()
	if os.Getenv("KIP_PPROF") != "1" {
		start := time.Now()
		fn()
		return time.Since(start)
	}
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		t.Fatalf("StartCPUProfile: %v", err)
	}
	start := time.Now()
	fn()
	d := time.Since(start)
	pprof.StopCPUProfile()
	enc := base64.StdEncoding.EncodeToString(buf.Bytes())
	fmt.Printf("PPROF-BEGIN %s\n", name)
	for len(enc) > 0 {
		n := min(120, len(enc))
		fmt.Println(enc[:n])
		enc = enc[n:]
	}
	fmt.Printf("PPROF-END %s\n", name)
	return d
}

// BestSliced runs a sliced operation k times (run returns its slice
// count, its longest slice and its total time) and returns the run with
// the shortest total.
func BestSliced(k int, run func() (slices int, longest, total time.Duration)) (int, time.Duration, time.Duration) {
	var bs int
	var bl, bt time.Duration
	for i := range k {
		s, l, t := run()
		if i == 0 || t < bt {
			bs, bl, bt = s, l, t
		}
	}
	return bs, bl, bt
}

// Interleaved runs each fn once per round, in order, for rounds rounds,
// and returns each fn's shortest time, so that the host's load weighs on
// all of them alike.
func Interleaved(rounds int, fns ...func()) []time.Duration {
	best := make([]time.Duration, len(fns))
	for i := range rounds {
		for j, fn := range fns {
			start := time.Now()
			fn()
			if d := time.Since(start); i == 0 || d < best[j] {
				best[j] = d
			}
		}
	}
	return best
}
