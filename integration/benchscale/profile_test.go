//go:build integration

package benchscale

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"time"
)

// cpuWindow is the length of one CPU profile window during a start (the
// cold start, the restart): pprof's endpoint profiles for a fixed time,
// so a start is covered by consecutive windows, which also say when the
// CPU went where (`go tool pprof` merges them).
const cpuWindow = 2 * time.Second

// heapProfile reports the proxy's heap profile (after a forced GC) on a
// ProfilePrefix line when KIP_BENCH_SCALE_PROFILE=1.
func (b *bench) heapProfile(when string) {
	if b.phases.Profile != 1 {
		return
	}
	c := http.Client{Timeout: time.Minute}
	body, err := fetch(context.Background(), &c, "http://"+metricsAddr+"/debug/pprof/heap?gc=1")
	if err != nil {
		b.p.fatal(b.t, "heap profile: %v", err)
	}
	b.report(Profile{Proxy: b.bin.label, Round: b.run.Round, When: when, Kind: "heap", Pprof: body})
}

// profileSelf starts a CPU profile of the harness itself (the VM half:
// the writers and the watcher, which share the VM's vCPUs with the
// proxy); the returned stop reports it as the proxy "harness-<label>".
// It is taken in every run, since it costs the proxy nothing: the
// harness samples itself.
func (b *bench) profileSelf(when string) (stop func()) {
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		b.t.Logf("%s: no profile of the harness: %v", when, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		b.report(Profile{Proxy: "harness-" + b.bin.label, Round: b.run.Round, When: when, Kind: "cpu", Pprof: buf.Bytes()})
	}
}

func (b *bench) report(p Profile) {
	js, err := json.Marshal(p)
	if err != nil {
		b.t.Fatal(err)
	}
	fmt.Println(ProfilePrefix + string(js))
}

func fetch(ctx context.Context, c *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", url, resp.Status)
	}
	return body, err
}

// cpuProfiler takes the proxy's CPU profile in consecutive windows from
// the moment its metrics server answers until stop.
type cpuProfiler struct {
	phase  string
	start  time.Time
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	got    []Profile
}

// profileStart starts a cpuProfiler when KIP_BENCH_SCALE_PROFILE=1 (nil
// otherwise); start is the process start.
func (b *bench) profileStart(phase string, start time.Time) *cpuProfiler {
	if b.phases.Profile != 1 {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	cp := &cpuProfiler{phase: phase, start: start, cancel: cancel}
	cp.wg.Add(1)
	go func() {
		defer cp.wg.Done()
		c := http.Client{}
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", metricsAddr, int(cpuWindow/time.Second))
		for ctx.Err() == nil {
			from := time.Since(start)
			body, err := fetch(ctx, &c, url)
			if err != nil {
				// Not serving yet, or stopped mid-window.
				select {
				case <-ctx.Done():
				case <-time.After(20 * time.Millisecond):
				}
				continue
			}
			cp.mu.Lock()
			cp.got = append(cp.got, Profile{Proxy: b.bin.label, Round: b.run.Round, Kind: "cpu",
				When: fmt.Sprintf("%s-%05.1fs", strings.ReplaceAll(phase, " ", "-"), from.Seconds()), Pprof: body})
			cp.mu.Unlock()
		}
	}()
	if phase == "cold start" {
		cp.wg.Add(1)
		go func() {
			defer cp.wg.Done()
			cp.trace(ctx, b)
		}()
	}
	return cp
}

// traceAt and traceFor place the one execution trace of a cold start:
// at 10,000 services the first sync runs from about 6 s to 15 s after
// the process start, so the trace shows the IPVS writer's goroutine
// mid-sync, where it runs and where it waits (`go tool trace
// -pprof=sched|syscall|sync`); a smaller cold start ends before it.
const (
	traceAt  = 8 * time.Second
	traceFor = 4 * time.Second
)

func (cp *cpuProfiler) trace(ctx context.Context, b *bench) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Until(cp.start.Add(traceAt))):
	}
	c := http.Client{}
	url := fmt.Sprintf("http://%s/debug/pprof/trace?seconds=%d", metricsAddr, int(traceFor/time.Second))
	body, err := fetch(ctx, &c, url)
	if err != nil {
		return // converged before it ended
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.got = append(cp.got, Profile{Proxy: b.bin.label, Round: b.run.Round, Kind: "trace",
		When: fmt.Sprintf("cold-start-%05.1fs", traceAt.Seconds()), Pprof: body})
}

// stop ends the windows (the one under way is lost) and reports those
// taken.
func (cp *cpuProfiler) stop(b *bench) {
	if cp == nil {
		return
	}
	cp.cancel()
	cp.wg.Wait()
	for _, p := range cp.got {
		b.report(p)
	}
	b.t.Logf("%s: %d profiles: CPU windows of %v, and at a cold start outlasting %v an execution trace", cp.phase, len(cp.got), cpuWindow, traceAt+traceFor)
}

// startupTimeline logs when the proxy logged its startup milestones,
// from the process start: where the cold start went before the first
// sync.
func (b *bench) startupTimeline(phase string, start time.Time) {
	data, err := os.ReadFile(b.p.logPath)
	if err != nil {
		b.t.Logf("%s: timeline: %v", phase, err)
		return
	}
	var marks []string
	listFailures := 0
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, "Cannot list the host's addresses") {
			listFailures++
		}
		for _, m := range []string{"Starting the proxy", "Informer caches synced", `"Synced" full=true`} {
			if !strings.Contains(l, m) {
				continue
			}
			if at, ok := klogTime(l, start); ok {
				marks = append(marks, fmt.Sprintf("%s at %.2fs", strings.Trim(m, `"`), at.Seconds()))
			}
		}
	}
	b.t.Logf("%s: timeline from the process start: %s; host-address Lists failed: %d", phase, strings.Join(marks, "; "), listFailures)
}

// firstSyncParts reports where a start went up to its first sync, from
// the proxy's log: when the informer caches were synced and the first
// sync done, from the process start, and how long that sync took in each
// writer ("First sync done" says; the rest of its elapsed, mostly
// computing the plan, is reported as the plan). A proxy that does not
// log the writers' times (one built before they were logged) reports
// none of these. They are added to run.
func (b *bench) firstSyncParts(run *Run, phase string, start time.Time) {
	data, err := os.ReadFile(b.p.logPath)
	if err != nil {
		b.t.Logf("%s: first sync's parts: %v", phase, err)
		return
	}
	var synced, done time.Duration
	var times map[string]time.Duration
	for _, l := range strings.Split(string(data), "\n") {
		at, ok := klogTime(l, start)
		switch {
		case !ok:
		case strings.Contains(l, "Informer caches synced"):
			synced = at
		case strings.Contains(l, `"First sync done"`):
			done, times = at, logDurations(l)
		}
		if done > 0 {
			break
		}
	}
	sync, nft, ipvs := times["elapsed"], times["nftables"], times["ipvs"]
	if synced == 0 || done == 0 || ipvs == 0 {
		b.t.Logf("%s: the log does not say the first sync's parts (caches synced at %v, first sync done at %v, its times %v)", phase, synced, done, times)
		return
	}
	plan := sync - nft - ipvs
	b.t.Logf("%s: informer caches synced at %.2fs, first sync done at %.2fs; the sync took %v: the plan %v, nftables %v, IPVS %v",
		phase, synced.Seconds(), done.Seconds(), sync, plan, nft, ipvs)
	run.Add(phase+": informer caches synced, from the process start", synced.Seconds(), "s")
	run.Add(phase+": first sync done, from the process start", done.Seconds(), "s")
	run.Add(phase+": first sync: the plan", plan.Seconds(), "s")
	run.Add(phase+": first sync: nftables", nft.Seconds(), "s")
	run.Add(phase+": first sync: IPVS", ipvs.Seconds(), "s")
}

// klogTime reads a klog header's time ("I1124 14:02:05.123456 ...") as
// an offset from start (same day, local time).
func klogTime(line string, start time.Time) (time.Duration, bool) {
	f := strings.Fields(line)
	if len(f) < 2 || len(f[0]) != 5 {
		return 0, false
	}
	t, err := time.ParseInLocation("15:04:05.000000", f[1], time.Local)
	if err != nil {
		return 0, false
	}
	y, mo, d := start.Date()
	t = time.Date(y, mo, d, t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.Local)
	return t.Sub(start), true
}

// startedProxy is a start (cold, restart) once it converged: when, the
// proxy's CPU then, and its profiler, which runs on until afterStart so
// that the work right after the first sync is profiled too.
type startedProxy struct {
	phase         string
	at, converged time.Time
	cpu           time.Duration
	cp            *cpuProfiler
}

// afterStart ends a start once the caller read the proxy's CPU (cpu):
// it logs how much of it came after convergence (while the harness
// checked the kernel), stops the profiler (its windows from the
// convergence on are the after-convergence ones) and logs what the
// proxy logged after convergence.
func (b *bench) afterStart(cpu time.Duration) {
	s := b.started
	b.t.Logf("%s: CPU %.2fs at convergence (%.2fs after the process start), %.2fs more until read %.2fs later",
		s.phase, s.cpu.Seconds(), s.converged.Sub(s.at).Seconds(), (cpu - s.cpu).Seconds(), time.Since(s.converged).Seconds())
	s.cp.stop(b)
	b.logProxyLines(s.phase+": the proxy's log after convergence", s.converged, time.Now(), 30)
}

// stalled is an endpoint change slow enough to have the proxy's log over
// it printed.
const stalled = time.Second

// logProxyLines logs the proxy's log lines stamped from from to to, at
// most max (the first ones): what it did while the harness saw something
// slow or unprofiled.
func (b *bench) logProxyLines(what string, from, to time.Time, max int) {
	data, err := os.ReadFile(b.p.logPath)
	if err != nil {
		b.t.Logf("%s: %v", what, err)
		return
	}
	var lines []string
	n := 0
	for _, l := range strings.Split(string(data), "\n") {
		at, ok := klogTime(l, from)
		if !ok || at < 0 || at > to.Sub(from) {
			continue
		}
		n++
		if len(lines) < max {
			if len(l) > 300 {
				l = l[:300] + "…"
			}
			lines = append(lines, fmt.Sprintf("+%.3fs %s", at.Seconds(), l))
		}
	}
	b.t.Logf("%s (%d lines, the first %d):\n%s", what, n, len(lines), strings.Join(lines, "\n"))
}
