//go:build integration

package benchscale

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// churnPoll is how often the churn's watcher reads each pending change's
// virtual server: coarser than pollEvery, since several are pending at
// once. A pass over the pending changes is followed by a pause at least
// as long as the pass, so that the watcher, which shares the VM's vCPUs
// with the proxy, takes at most half of one however many changes are
// pending (each read is two netlink requests, about 5 ms of CPU under
// TCG in the harness's profile): a slow proxy would otherwise leave more
// changes pending, and more reads slow the proxy further.
const churnPoll = 10 * time.Millisecond

const mProgramming = "kubeproxy_network_programming_duration_seconds_bucket"

// churn: ChurnRate endpoint changes a second for ChurnSeconds (issue 11,
// target 4), each to another service, written at that pace by 4 writers,
// each slice stamped with the trigger time the EndpointSlice controller
// would set. A watcher on its own IPVS handle sees each change reach the
// kernel (write → kernel), and the proxy's own
// kubeproxy_network_programming_duration_seconds over the phase gives the
// trigger → programmed view. With fewer services than changes, a service
// is changed again ChurnRate/Services seconds later.
func (b *bench) churn() {
	rate, n := b.phases.ChurnRate, b.phases.ChurnRate*b.phases.ChurnSeconds
	if n == 0 {
		return
	}
	type change struct {
		i         int
		old, next netip.Addr
		t0, seen  time.Time
	}
	changes := make([]*change, n)
	for k := range changes {
		i := b.w.Pick(k, 2*b.w.Services/3)
		old, next := b.advance(i)
		changes[k] = &change{i: i, old: old, next: next}
	}
	before := b.p.counters(b.t)
	hBefore := b.programming()
	cp := b.profileStart("churn", time.Now()) // CPU windows through the churn (KIP_BENCH_SCALE_PROFILE=1)
	stopSelf := b.profileSelf("churn")

	written := make(chan *change, n)
	watched := make(chan struct{})
	reads := 0 // the watcher's, read once watched is closed
	selfBefore := selfCPU()
	k := newKernel(b.t) // opened here: t.Fatal must not run in the watcher
	go func() {         // the watcher
		defer close(watched)
		var pending []*change
		open := true
		deadline := time.Time{}
		for open || len(pending) > 0 {
		drain:
			for {
				select {
				case c, ok := <-written:
					if !ok {
						open, deadline = false, time.Now().Add(changeLimit)
						break drain
					}
					pending = append(pending, c)
				default:
					break drain
				}
			}
			pass := time.Now()
			kept := pending[:0]
			for _, c := range pending {
				reads++
				// One request, not two: a change is seen once next is
				// listed, and a missing virtual server lists nothing.
				if replaced(c.old, c.next)(k.listed(httpVS(ClusterIP(c.i))), true) {
					c.seen = time.Now()
				} else {
					kept = append(kept, c)
				}
			}
			pending = kept
			if !open && time.Now().After(deadline) {
				return // the unseen fail below
			}
			time.Sleep(max(churnPoll, time.Since(pass)))
		}
	}()

	todo := make(chan *change)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for c := range todo {
				c.t0 = time.Now()
				s := b.w.Slice(c.i, generationOf(c.i, c.next)) // b.gens is the phase's last
				s.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: c.t0.UTC().Format(time.RFC3339Nano)}
				if _, err := b.admin.DiscoveryV1().EndpointSlices(s.Namespace).Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
					errs <- err
				}
				written <- c
			}
		})
	}
	t0 := time.Now()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	for _, c := range changes {
		todo <- c
		<-tick.C
	}
	tick.Stop()
	close(todo)
	wg.Wait()
	writes := time.Since(t0)
	close(written)
	<-watched
	harness := selfCPU() - selfBefore
	stopSelf()
	cp.stop(b)
	close(errs)
	for err := range errs {
		b.t.Fatalf("churn update: %v", err)
	}
	var lat []float64
	for _, c := range changes {
		if c.seen.IsZero() {
			b.t.Fatalf("churn: service %d's change %v → %v not in the kernel %v after the last write", c.i, c.old, c.next, changeLimit)
		}
		lat = append(lat, ms(c.seen.Sub(c.t0)))
	}
	d := before.delta(b.p.counters(b.t))
	prog := b.programming().minus(hBefore)
	b.t.Logf("churn: %d changes in %v (%.1f/s): write → kernel p50 %.0f ms, p99 %.0f ms, max %.0f ms; programming duration p50 %.3f s, p99 %.3f s (%.0f observed); %.0f syncs",
		n, writes.Round(time.Millisecond), float64(n)/writes.Seconds(), Percentile(lat, 50), Percentile(lat, 99), Percentile(lat, 100),
		HistogramQuantile(0.5, prog), HistogramQuantile(0.99, prog), total(prog), d.syncs)
	b.run.Add("churn: changes a second", float64(n)/writes.Seconds(), "")
	b.run.Add("churn: write → kernel p50", Percentile(lat, 50), "ms")
	b.run.Add("churn: write → kernel p99", Percentile(lat, 99), "ms")
	b.run.Add("churn: write → kernel max", Percentile(lat, 100), "ms")
	b.run.Add("churn: network programming duration p50", 1000*HistogramQuantile(0.5, prog), "ms")
	b.run.Add("churn: network programming duration p99", 1000*HistogramQuantile(0.99, prog), "ms")
	b.run.Add("churn: network programming observations", total(prog), "")
	b.run.Add("churn: syncs", d.syncs, "")
	b.run.Add("churn: CPU", 100*d.cpu.Seconds()/writes.Seconds(), "% of a CPU")
	b.t.Logf("churn: the harness (writers and watcher) used %v CPU; the watcher read a virtual server %d times", harness.Round(time.Millisecond), reads)
	b.run.Add("churn: the harness's CPU (writers and watcher, in the VM)", 100*harness.Seconds()/writes.Seconds(), "% of a CPU")
	b.run.Add("churn: the watcher's reads of a virtual server", float64(reads), "")
}

// selfCPU is this process's user+system CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// generationOf is the generation whose LastEndpoint(i, gen) is next.
func generationOf(i int, next netip.Addr) int {
	for g := range Generations {
		if LastEndpoint(i, g) == next {
			return g
		}
	}
	return -1
}

// histogram is a cumulative histogram by upper bound.
type histogram map[float64]float64

// programming reads kubeproxy_network_programming_duration_seconds, both
// families added.
func (b *bench) programming() histogram {
	m, err := scrape()
	if err != nil {
		b.p.fatal(b.t, "scrape: %v", err)
	}
	h := histogram{}
	for series, v := range m {
		name, labels, _ := strings.Cut(series, "{")
		if name != mProgramming {
			continue
		}
		_, le, ok := strings.Cut(labels, `le="`)
		if !ok {
			continue
		}
		le, _, _ = strings.Cut(le, `"`)
		bound := math.Inf(1)
		if le != "+Inf" {
			if bound, err = strconv.ParseFloat(le, 64); err != nil {
				continue
			}
		}
		h[bound] += v
	}
	return h
}

// minus is the observations made since earlier, as buckets.
func (h histogram) minus(earlier histogram) []Bucket {
	var out []Bucket
	for le, c := range h {
		out = append(out, Bucket{LE: le, Count: c - earlier[le]})
	}
	return out
}

// total is the observation count of buckets (the +Inf bucket's).
func total(buckets []Bucket) float64 {
	t := 0.0
	for _, x := range buckets {
		t = max(t, x.Count)
	}
	return t
}

// table is the kernel's IPVS table and kube-ipvs0's addresses.
type table struct {
	services []*ipvs.Service
	dests    [][]*ipvs.Destination
	addrs    []netlink.Addr
}

// snapshot reads the table the proxy programmed.
func (k *kernel) snapshot(t *testing.T) table {
	t.Helper()
	var tb table
	svcs, err := k.h.GetServices()
	if err != nil {
		t.Fatalf("ipvs services: %v", err)
	}
	for _, s := range svcs {
		ds, err := k.h.GetDestinations(s)
		if err != nil {
			t.Fatalf("ipvs destinations of %s:%d: %v", s.Address, s.Port, err)
		}
		tb.services, tb.dests = append(tb.services, s), append(tb.dests, ds)
	}
	link, err := netlink.LinkByName("kube-ipvs0")
	if err != nil {
		t.Fatalf("kube-ipvs0: %v", err)
	}
	if tb.addrs, err = netlink.AddrList(link, netlink.FAMILY_V4); err != nil {
		t.Fatalf("kube-ipvs0 addresses: %v", err)
	}
	return tb
}

// floor: the kernel's floor for the cold start (issue 11, target 1): the
// table the proxy programmed at its cold start, programmed again by
// moby/ipvs and netlink alone, one request per virtual server,
// destination and address, one after the other, as the kernel's IPVS
// configuration path serializes them, on one IPVS and one rtnetlink
// handle (sockets reused, as the proxy's).
//
// It runs in a network namespace of its own, made for it: IPVS keeps
// every deleted destination in a per-namespace trash list for two to
// four minutes (IP_VS_DEST_TRASH_PERIOD), and each destination added
// meanwhile searches that list first, so right after --cleanup (50,000
// destinations at 5,000 services) the same table took 2.3 to 4.8 times
// as long in the namespace the proxy used (a VM experiment, 2026-11-24).
// The proxy's cold start ran on a kernel fresh from boot; so does this.
func (b *bench) floor(tb table, cold time.Duration) {
	t := b.t
	const hashed = 0x2 // IP_VS_SVC_F_HASHED: reported by the kernel, refused back
	var took, addrsTook time.Duration
	var progress []string
	var got Expected
	err := inFreshNetns(func() error {
		h, err := ipvs.New("")
		if err != nil {
			return fmt.Errorf("ipvs handle: %w", err)
		}
		defer h.Close()
		nh, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return fmt.Errorf("rtnetlink handle: %w", err)
		}
		defer nh.Close()
		t0 := time.Now()
		dummy := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "kube-ipvs0"}}
		if err := nh.LinkAdd(dummy); err != nil {
			return fmt.Errorf("add kube-ipvs0: %w", err)
		}
		for _, a := range tb.addrs {
			a := netlink.Addr{IPNet: &net.IPNet{IP: a.IP, Mask: a.Mask}}
			if err := nh.AddrAdd(dummy, &a); err != nil {
				return fmt.Errorf("add address %s: %w", a.IPNet, err)
			}
		}
		addrsTook = time.Since(t0)
		for i, s := range tb.services {
			if i > 0 && i%1000 == 0 {
				progress = append(progress, fmt.Sprintf("%d:%.1fs", i, time.Since(t0).Seconds()))
			}
			s.Flags &^= hashed
			if err := h.NewService(s); err != nil {
				return fmt.Errorf("add virtual server %s:%d: %w", s.Address, s.Port, err)
			}
			for _, d := range tb.dests[i] {
				if err := h.NewDestination(s, d); err != nil {
					return fmt.Errorf("add destination %s:%d to %s:%d: %w", d.Address, d.Port, s.Address, s.Port, err)
				}
			}
		}
		took = time.Since(t0)
		got, err = (&kernel{h: h}).count()
		return err
	})
	b.floorHolds(t, "floor", got, err)
	t.Logf("floor: %d virtual servers, their destinations and %d addresses programmed in %v (the addresses %v; virtual servers done by then: %s); the cold start took %.2f× that",
		len(tb.services), len(tb.addrs), took.Round(time.Millisecond), addrsTook.Round(time.Millisecond),
		strings.Join(progress, " "), cold.Seconds()/took.Seconds())
	b.run.Add("floor: the same table by moby/ipvs and netlink, one request each", took.Seconds(), "s")
	b.run.Add("cold start / floor", cold.Seconds()/took.Seconds(), "")
}

// inFreshNetns runs fn on a thread moved into a new network namespace,
// which goes away (and the kernel state in it) once fn returns, and moves
// the thread back. A thread left there would be ended with its goroutine,
// unless it is the process's main thread, which the runtime parks instead:
// then /proc/net, which shows the main thread's namespace, would list the
// floor's table for the rest of the boot.
func inFreshNetns(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // unlocked only once back in the namespace it came from
		orig, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("this thread's network namespace: %w", err)
			return
		}
		defer orig.Close()
		ns, err := netns.New()
		if err != nil {
			errc <- fmt.Errorf("new network namespace: %w", err)
			return
		}
		defer ns.Close()
		fnErr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- errors.Join(fnErr, fmt.Errorf("back to the original network namespace: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- fnErr
	}()
	return <-errc
}
