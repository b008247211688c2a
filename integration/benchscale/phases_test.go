//go:build integration

package benchscale

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/moby/ipvs"
	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// changeLimit bounds the wait for one change to reach the kernel.
const changeLimit = 3 * time.Minute

const mib = 1 << 20

// coldStart: the proxy starts against a clean kernel and an apiserver
// that holds the whole workload (a new node, or the first rollout).
func (b *bench) coldStart() time.Duration {
	took, m := b.start("cold start")
	cpu := b.p.cpu(b.t)
	b.afterStart(cpu)
	rss, hwm := b.p.memory(b.t)
	b.t.Logf("cold start: converged in %v, %v CPU, %.0f MiB (peak %.0f)", took.Round(time.Millisecond), cpu, rss, hwm)
	b.run.Add("cold start: converged", took.Seconds(), "s")
	b.run.Add("cold start: CPU", cpu.Seconds(), "s")
	b.run.Add("cold start: syncs", m.sum(mSyncCount), "")
	b.run.Add("cold start: time in syncs", m.sum(mSyncSum), "s")
	b.run.Add("cold start: IPVS ops", m.sum(mNetlinkOps, opsAttempted), "")
	b.run.Add("memory after cold start: RSS", rss, "MiB")
	// The cold start's own peak; "memory at the end: peak RSS" is the
	// whole run's, the churn's and the repairs' included.
	b.run.Add("memory after cold start: peak RSS (VmHWM)", hwm, "MiB")
	b.run.Add("memory after cold start: Go heap in use", m.sum(mHeapInuse)/mib, "MiB")
	b.settledMemory("cold start")
	b.firstSyncParts(b.run, "cold start", b.started.at)
	b.logSyncsAfterFirst()
	return took
}

// logSyncsAfterFirst logs the proxy's syncs and repairs since its first
// full sync (its "Synced" and "Repaired" lines, at most 10): what ran
// while the memory settled.
func (b *bench) logSyncsAfterFirst() {
	data, err := os.ReadFile(b.p.logPath)
	if err != nil {
		b.t.Logf("cold start: syncs after the first: %v", err)
		return
	}
	var lines []string
	n, first := 0, false
	for _, l := range strings.Split(string(data), "\n") {
		switch {
		case !first:
			first = strings.Contains(l, `"Synced" full=true`)
		case strings.Contains(l, `"Synced"`) || strings.Contains(l, `"Repaired"`):
			n++
			if len(lines) < 10 {
				lines = append(lines, l)
			}
		}
	}
	b.t.Logf("cold start: %d syncs or repairs logged after the first full sync (the first 10):\n%s", n, strings.Join(lines, "\n"))
}

// settledMemory reads RSS for settleFor after a phase (what is "cold
// start" or "churn"), once a second: the proxy returns what its first
// sync freed to the OS beside the loop, after the sync, and what a burst
// of changes freed once the loop has been quiet for a few seconds; that
// takes seconds at 10,000 services under TCG. The last reading is the
// phase's settled RSS (the first periodic repair starts syncPeriod, 30 s,
// after the first sync); the series and the Go runtime's split of its
// memory are logged.
func (b *bench) settledMemory(what string) {
	const settleFor = 15 * time.Second
	start := time.Now()
	var series []string
	var rss float64
	for time.Since(start) < settleFor {
		time.Sleep(time.Second)
		rss, _ = b.p.memory(b.t)
		series = append(series, fmt.Sprintf("%.0f", rss))
	}
	b.run.Add("memory after "+what+", settled: RSS", rss, "MiB")
	b.t.Logf("%s: RSS once a second after it (MiB): %s; now %s", what, strings.Join(series, " "), b.p.rssSplit(b.t))
	if m, err := scrape(); err == nil {
		b.t.Logf("%s: settled at %.0f MiB RSS; Go heap alloc %.0f, in use %.0f, idle %.0f, released %.0f, stacks %.0f, sys %.0f (MiB)",
			what, rss, m.sum(mHeapAlloc)/mib, m.sum(mHeapInuse)/mib, m.sum(mHeapIdle)/mib,
			m.sum(mHeapReleased)/mib, m.sum(mStackInuse)/mib, m.sum(mGoSys)/mib)
		b.t.Logf("%s: settled: runtime metadata: spans %.1f, GC %.1f, other %.1f, profiling buckets %.1f (MiB); next GC at %.0f MiB of heap",
			what, m.sum(mSpanInuse)/mib, m.sum(mGCSys)/mib, m.sum(mOtherSys)/mib, m.sum(mBuckHashSys)/mib, m.sum(mNextGC)/mib)
		b.run.Add("memory after "+what+", settled: Go heap in use", m.sum(mHeapInuse)/mib, "MiB")
	}
}

// idle: nothing changes for Idle; the proxy's periodic resyncs are all
// it does. RSS is read once a second: how far the periodic repairs, which
// read the whole kernel table back, lift it above where the window began.
func (b *bench) idle() {
	if b.phases.Idle == 0 {
		return
	}
	before := b.p.counters(b.t)
	first, _ := b.p.memory(b.t)
	most := first
	for end := time.Now().Add(b.phases.Idle); time.Now().Before(end); {
		time.Sleep(min(time.Second, time.Until(end)))
		rss, _ := b.p.memory(b.t)
		most = max(most, rss)
	}
	d := before.delta(b.p.counters(b.t))
	b.t.Logf("idle %v: %v CPU, %.0f syncs taking %.3fs, %.0f IPVS ops; RSS %.1f MiB at the start, at most %.1f", b.phases.Idle, d.cpu, d.syncs, d.syncS, d.ops, first, most)
	b.run.Add("idle: RSS, the most above the window's start", most-first, "MiB")
	b.run.Add("idle: CPU", 100*d.cpu.Seconds()/b.phases.Idle.Seconds(), "% of a CPU")
	b.run.Add("idle: syncs", d.syncs, "")
	if d.syncs > 0 {
		b.run.Add("idle: mean sync", 1000*d.syncS/d.syncs, "ms")
	}
	b.run.Add("idle: IPVS ops", d.ops, "")
}

// endpointChanges: one EndpointSlice update at a time (its last endpoint
// replaced), each waited for in the kernel: the latency from the write
// to the kernel, the apiserver round trip included.
func (b *bench) endpointChanges() {
	n := min(b.phases.Changes, b.w.Services)
	if n == 0 {
		return
	}
	before := b.p.counters(b.t)
	var lat, rtt []float64
	for k := range n {
		t0 := time.Now()
		_, l, w := b.changeEndpoint(k, changeLimit)
		lat, rtt = append(lat, ms(l)), append(rtt, ms(w))
		if l > stalled {
			b.logProxyLines(fmt.Sprintf("endpoint change %d took %v; the proxy's log over it", k, l.Round(time.Millisecond)),
				t0.Add(-time.Second), time.Now(), 40)
		}
	}
	d := before.delta(b.p.counters(b.t))
	b.t.Logf("%d endpoint changes: p50 %.1f ms, max %.1f ms", n, Percentile(lat, 50), Percentile(lat, 100))
	b.run.Add("endpoint change: latency p50", Percentile(lat, 50), "ms")
	b.run.Add("endpoint change: latency p90", Percentile(lat, 90), "ms")
	b.run.Add("endpoint change: latency max", Percentile(lat, 100), "ms")
	b.run.Add("endpoint change: of which the write, p50", Percentile(rtt, 50), "ms")
	b.run.Add("endpoint change: CPU per change", ms(d.cpu)/float64(n), "ms")
	b.run.Add("endpoint change: syncs per change", d.syncs/float64(n), "")
	b.run.Add("endpoint change: IPVS ops per change", d.ops/float64(n), "")
}

// changeEndpoint makes the k-th sequential endpoint change (service
// Pick(k, 0)'s last endpoint replaced) and waits for it in IPVS for up
// to limit: it returns the service, the time from the write to the
// kernel, and the write's own round trip.
func (b *bench) changeEndpoint(k int, limit time.Duration) (i int, latency, write time.Duration) {
	i = b.w.Pick(k, 0)
	old, next := b.advance(i)
	t0 := time.Now()
	s := b.w.Slice(i, b.gens[i]-1)
	if _, err := b.admin.DiscoveryV1().EndpointSlices(s.Namespace).Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		b.t.Fatalf("update %s/%s: %v", s.Namespace, s.Name, err)
	}
	write = time.Since(t0)
	at := b.k.waitFor(b.t, httpVS(ClusterIP(i)), limit, "endpoint change", replaced(old, next))
	return i, at.Sub(t0), write
}

// burst: Burst EndpointSlice updates to distinct services written at
// once by 8 writers; how long until the kernel holds them all.
func (b *bench) burst() {
	n := min(b.phases.Burst, b.w.Services)
	if n == 0 {
		return
	}
	type change struct {
		i         int
		old, next netip.Addr
		written   time.Time
	}
	var changes []*change
	for k := range n {
		i := b.w.Pick(k, b.w.Services/2)
		old, next := b.advance(i)
		changes = append(changes, &change{i: i, old: old, next: next})
	}
	before := b.p.counters(b.t)
	todo := make(chan *change)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range 8 {
		wg.Go(func() {
			for c := range todo {
				s := b.w.Slice(c.i, b.gens[c.i]-1)
				if _, err := b.admin.DiscoveryV1().EndpointSlices(s.Namespace).Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
					errs <- err
				}
				c.written = time.Now()
			}
		})
	}
	t0 := time.Now()
	for _, c := range changes {
		todo <- c
	}
	close(todo)
	wg.Wait()
	writes := time.Since(t0)
	close(errs)
	for err := range errs {
		b.t.Fatalf("burst update: %v", err)
	}
	// The last write is waited for precisely; the others are then checked
	// (if some still lag, the time is when the last of them is seen).
	lastWritten := slices.MaxFunc(changes, func(a, c *change) int { return a.written.Compare(c.written) })
	done := b.k.waitFor(b.t, httpVS(ClusterIP(lastWritten.i)), changeLimit, "burst's last change", replaced(lastWritten.old, lastWritten.next))
	for _, c := range changes {
		if at := b.k.waitFor(b.t, httpVS(ClusterIP(c.i)), changeLimit, "burst change", replaced(c.old, c.next)); at.After(done) {
			done = at
		}
	}
	all := done.Sub(t0)
	d := before.delta(b.p.counters(b.t))
	b.t.Logf("burst of %d: written in %v, all in the kernel after %v (%v after the last write), %.0f syncs", n, writes.Round(time.Millisecond),
		all.Round(time.Millisecond), done.Sub(lastWritten.written).Round(time.Millisecond), d.syncs)
	b.run.Add("burst: changes", float64(n), "")
	b.run.Add("burst: all written", writes.Seconds(), "s")
	b.run.Add("burst: all in the kernel", all.Seconds(), "s")
	b.run.Add("burst: of which after the last write", done.Sub(lastWritten.written).Seconds(), "s")
	b.run.Add("burst: syncs", d.syncs, "")
	b.run.Add("burst: CPU per change", ms(d.cpu)/float64(n), "ms")
	b.run.Add("burst: IPVS ops per change", d.ops/float64(n), "")
}

// serviceChurn: NewServices services created (Service, then its
// EndpointSlice) one at a time, each waited for with all its
// destinations; then deleted one at a time, each waited for to go.
func (b *bench) serviceChurn() {
	n := b.phases.NewServices
	if n == 0 {
		return
	}
	ctx := context.Background()
	before := b.p.counters(b.t)
	// CPU windows through the creates and deletes (KIP_BENCH_SCALE_PROFILE=1),
	// and the harness's own: what a create and a delete cost the proxy.
	cp := b.profileStart("service-churn", time.Now())
	stopSelf := b.profileSelf("service-churn")
	var created, deleted []float64
	for c := range n {
		svc, slice := NewService(c), NewSlice(c)
		t0 := time.Now()
		if _, err := b.admin.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			b.t.Fatalf("create %s/%s: %v", svc.Namespace, svc.Name, err)
		}
		if _, err := b.admin.DiscoveryV1().EndpointSlices(slice.Namespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			b.t.Fatalf("create %s/%s: %v", slice.Namespace, slice.Name, err)
		}
		at := b.k.waitFor(b.t, httpVS(NewClusterIP(c)), changeLimit, "new service",
			func(a []netip.Addr, ok bool) bool { return ok && len(a) == PerService })
		created = append(created, ms(at.Sub(t0)))
	}
	for c := range n {
		svc, slice := NewService(c), NewSlice(c)
		t0 := time.Now()
		if err := b.admin.CoreV1().Services(svc.Namespace).Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil {
			b.t.Fatalf("delete %s/%s: %v", svc.Namespace, svc.Name, err)
		}
		at := b.k.waitFor(b.t, httpVS(NewClusterIP(c)), changeLimit, "deleted service",
			func(_ []netip.Addr, ok bool) bool { return !ok })
		deleted = append(deleted, ms(at.Sub(t0)))
		if err := b.admin.DiscoveryV1().EndpointSlices(slice.Namespace).Delete(ctx, slice.Name, metav1.DeleteOptions{}); err != nil {
			b.t.Fatalf("delete %s/%s: %v", slice.Namespace, slice.Name, err)
		}
	}
	stopSelf()
	cp.stop(b)
	d := before.delta(b.p.counters(b.t))
	b.t.Logf("%d services created (p50 %.1f ms) and deleted (p50 %.1f ms)", n, Percentile(created, 50), Percentile(deleted, 50))
	b.run.Add("service create: latency p50", Percentile(created, 50), "ms")
	b.run.Add("service create: latency max", Percentile(created, 100), "ms")
	b.run.Add("service delete: latency p50", Percentile(deleted, 50), "ms")
	b.run.Add("service delete: latency max", Percentile(deleted, 100), "ms")
	b.run.Add("service create+delete: CPU per service", ms(d.cpu)/float64(n), "ms")
}

// restart: SIGTERM, then a new process against the programmed kernel
// (a rollout of the DaemonSet): how long until it has synced, and how
// many IPVS changes it made (none are needed).
func (b *bench) restart() {
	exit := b.p.stop(b.t)
	took, m := b.start("restart")
	b.t.Logf("restart: exit %v, converged in %v, %.0f IPVS ops", exit.Round(time.Millisecond), took.Round(time.Millisecond), m.sum(mNetlinkOps, opsAttempted))
	b.run.Add("restart: exit on SIGTERM", exit.Seconds(), "s")
	b.run.Add("restart: converged", took.Seconds(), "s")
	cpu := b.p.cpu(b.t)
	b.afterStart(cpu)
	b.k.readCost(b.t)
	b.run.Add("restart: CPU", cpu.Seconds(), "s")
	b.run.Add("restart: IPVS ops", m.sum(mNetlinkOps, opsAttempted), "")
	b.firstSyncParts(b.run, "restart", b.started.at)
}

// cleanup: stop the proxy, run --cleanup, and check that nothing is
// left for the next run.
func (b *bench) cleanup() {
	b.p.stop(b.t)
	t0 := time.Now()
	if out, err := exec.Command(b.bin.path, "--cleanup").CombinedOutput(); err != nil {
		b.t.Fatalf("--cleanup: %v\n%s", err, out)
	}
	took := time.Since(t0)
	if got, err := b.k.count(); err != nil || got != (Expected{}) {
		b.t.Fatalf("after --cleanup the kernel holds %+v (err %v)", got, err)
	}
	b.run.Add("--cleanup", took.Seconds(), "s")
}

// advance moves service i's last endpoint to its next generation and
// returns the old and the new address.
func (b *bench) advance(i int) (old, next netip.Addr) {
	old = LastEndpoint(i, b.gens[i]-1)
	b.gens[i] = b.gens[i]%Generations + 1
	return old, LastEndpoint(i, b.gens[i]-1)
}

// replaced holds once a virtual server has next and not old.
func replaced(old, next netip.Addr) func([]netip.Addr, bool) bool {
	return func(a []netip.Addr, ok bool) bool { return ok && slices.Contains(a, next) && !slices.Contains(a, old) }
}

// httpVS is the http port's TCP virtual server on a cluster IP.
func httpVS(ip netip.Addr) *ipvs.Service { return virtualServer(ip, HTTPPort, unix.IPPROTO_TCP) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
