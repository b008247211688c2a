package app

import (
	"fmt"
	"io"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// A dry run that has not finished after progressAfter says so on stderr,
// then every progressEvery, so that a large input does not look hung.
const (
	progressAfter = 3 * time.Second
	progressEvery = 5 * time.Second
)

// startProgress reports on w that the dry run is still under way, after
// `after` and then every `every` on clk, until the returned stop is
// called.
func startProgress(w io.Writer, clk clock.Clock, after, every time.Duration) (stop func()) {
	start := clk.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := clk.NewTimer(after)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C():
			}
			fmt.Fprintf(w, "kube-ipvs-proxy: dry run: still loading the objects and computing the plan (%s so far)\n",
				clk.Since(start).Round(time.Second))
			t.Reset(every)
		}
	})
	return func() {
		close(done)
		wg.Wait()
		if d := clk.Since(start); d >= after {
			fmt.Fprintf(w, "kube-ipvs-proxy: dry run: done in %s\n", d.Round(100*time.Millisecond))
		}
	}
}
