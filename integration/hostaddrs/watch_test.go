//go:build integration

package hostaddrs

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/hostaddr"
)

const (
	dummy = "kube-ipvs0"
	node  = "node-test0"
)

func addLink(t *testing.T, name string) netlink.Link {
	t.Helper()
	l := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: name}}
	if err := netlink.LinkAdd(l); err != nil {
		t.Fatalf("add %s: %v", name, err)
	}
	t.Cleanup(func() { _ = netlink.LinkDel(l) })
	return l
}

func addAddr(t *testing.T, l netlink.Link, cidr string) {
	t.Helper()
	p := netip.MustParsePrefix(cidr)
	a := &netlink.Addr{IPNet: labnet.IPNet(p)}
	if err := netlink.AddrAdd(l, a); err != nil {
		t.Fatalf("add %s to %s: %v", cidr, l.Attrs().Name, err)
	}
}

// watch runs n.Watch until the test ends, counting its calls of changed,
// with its log (V(2), where a broken subscription is logged) in the
// returned buffer. It returns once the call after subscribing has come
// and then the call for a marker address on marks, with the count then:
// whatever the kernel reported before the marker has been taken.
func watch(t *testing.T, n hostaddr.Netlink, marks netlink.Link) (calls *atomic.Int32, base int32, log *syncBuffer) {
	t.Helper()
	calls, log = new(atomic.Int32), new(syncBuffer)
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(log), textlogger.Verbosity(2)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	done := make(chan struct{})
	go func() { defer close(done); n.Watch(ctx, func() { calls.Add(1) }) }()
	t.Cleanup(func() { cancel(); <-done })
	waitForCalls(t, calls, "the call after subscribing", func() bool { return calls.Load() >= 1 })
	return calls, mark(t, calls, marks), log
}

// markers numbers the marker addresses of a test binary.
var markers atomic.Int32

// mark adds a new address to link, an interface the watch reports, and
// waits for the call it causes. A subscription delivers the kernel's
// updates in order, so once that call has come every update sent before
// the marker has been taken: what the watch did not report by then, it
// never will. It returns the count of calls then.
func mark(t *testing.T, calls *atomic.Int32, link netlink.Link) int32 {
	t.Helper()
	before := calls.Load()
	m := markers.Add(1)
	addAddr(t, link, fmt.Sprintf("203.0.113.%d/32", m))
	waitForCalls(t, calls, fmt.Sprintf("the call for marker %d", m), func() bool { return calls.Load() > before })
	return calls.Load()
}

// syncBuffer is a bytes.Buffer the watch's goroutine writes and the test
// reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitForCalls polls cond for up to 5 s.
func waitForCalls(t *testing.T, calls *atomic.Int32, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d calls", what, calls.Load())
		}
	}
}

// TestWatchIgnoresTheDummyInterface: the IPVS writer adds an address to
// the dummy interface per service VIP; none is a node address, so the
// watch does not report them (each report costs a List of every address
// on the host, which at a cold start of thousands of services competed
// with the writer for rtnetlink). An address on any other interface is
// reported, and List leaves the dummy interface's out.
func TestWatchIgnoresTheDummyInterface(t *testing.T) {
	n := hostaddr.Netlink{Exclude: dummy}
	ex := addLink(t, dummy)
	other := addLink(t, node)
	calls, base, _ := watch(t, n, other)

	for i := range 500 {
		addAddr(t, ex, fmt.Sprintf("10.96.%d.%d/32", i/250, i%250+1))
	}
	if got := mark(t, calls, other) - base; got != 1 {
		t.Errorf("500 addresses on %s, then a marker on %s: %d calls, want 1 (the marker's)", dummy, node, got)
	}

	addAddr(t, other, "198.51.100.7/24")
	waitForCalls(t, calls, "an address on "+node, func() bool { return calls.Load() > base })
	addrs, err := n.List()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(addrs, netip.MustParseAddr("198.51.100.7")) {
		t.Errorf("List: %v, want 198.51.100.7 in it", addrs)
	}
	if slices.Contains(addrs, netip.MustParseAddr("10.96.0.1")) {
		t.Errorf("List: %v, want no address of %s", addrs, dummy)
	}

	// The dummy interface made again (a new index): still left out, after
	// at most one lookup.
	if err := netlink.LinkDel(ex); err != nil {
		t.Fatal(err)
	}
	base = mark(t, calls, other) // the deletion's updates taken
	again := addLink(t, dummy)
	for i := range 100 {
		addAddr(t, again, fmt.Sprintf("10.97.0.%d/32", i+1))
	}
	if got := mark(t, calls, other) - base; got != 1 {
		t.Errorf("100 addresses on the recreated %s, then a marker: %d calls, want 1 (the marker's)", dummy, got)
	}
}

// churnPause is the pause between two address changes of the churn
// beside the dumps: without one, nearly every attempt is interrupted (91
// of 100 single dumps; as through a cold start, when the proxier retries
// List a second later, see proxier.TestHostAddressesRetriedAfterAFailedList).
const churnPause = 20 * time.Millisecond

// TestListRedoesInterruptedDumps: a dump of every address that spans
// several messages while another address changes comes back marked
// interrupted (NLM_F_DUMP_INTR), as when the IPVS writer adds an address
// per service VIP while a node-address event asks for a List. List
// redoes such a dump instead of failing at once: before it did, 56 of
// 100 Lists failed beside this churn at a 5 ms pause, 91 unpaused.
func TestListRedoesInterruptedDumps(t *testing.T) {
	n := hostaddr.Netlink{Exclude: dummy}
	ex := addLink(t, dummy)
	other := addLink(t, node)
	addAddr(t, other, "198.51.100.7/24")
	for i := range 2000 { // enough for a dump of several messages
		addAddr(t, ex, fmt.Sprintf("10.96.%d.%d/32", i/250, i%250+1))
	}
	stop := labnet.ChurnAddress(ex, netip.MustParsePrefix("10.98.0.1/32"), churnPause)
	failed, raw := 0, 0
	for range 100 {
		if labnet.InterruptedDump() { // not redone: proof that the churn interrupts some
			raw++
		}
		addrs, err := n.List()
		if err != nil {
			failed++
			t.Logf("List: %v", err)
			continue
		}
		if !slices.Contains(addrs, netip.MustParseAddr("198.51.100.7")) {
			t.Errorf("List: %v, want 198.51.100.7 in it", addrs)
		}
	}
	t.Logf("100 Lists beside %d address changes: %d failed; %d of 100 single dumps were interrupted", stop(), failed, raw)
	if raw == 0 {
		t.Fatal("no dump was interrupted: the churn proves nothing")
	}
	if failed > 0 {
		t.Errorf("%d of 100 Lists failed beside address churn, want 0", failed)
	}
}

// TestWatchKeepsItsSubscriptionThroughABurst: 10,000 addresses added to
// the dummy interface as fast as two writers can, as the IPVS writer does
// at a cold start of 10,000 services, while two goroutines keep the CPUs
// busy as the cold start does: the subscription takes every event
// without overflowing its buffer, so it is never renewed, and renewal's
// List of every address (changed) is never asked for.
func TestWatchKeepsItsSubscriptionThroughABurst(t *testing.T) {
	n := hostaddr.Netlink{Exclude: dummy}
	ex := addLink(t, dummy)
	calls, base, log := watch(t, n, addLink(t, node))

	busy, stop := make(chan struct{}), make(chan struct{})
	for range 2 {
		go func() {
			defer func() { busy <- struct{}{} }()
			for {
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
	start := time.Now()
	errs := make(chan error, 2)
	for w := range 2 {
		go func() {
			h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
			if err != nil {
				errs <- err
				return
			}
			defer h.Close()
			for i := w; i < 10000; i += 2 {
				p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 96, byte(i / 250), byte(i%250 + 1)}), 32)
				if err := h.AddrAdd(ex, &netlink.Addr{IPNet: labnet.IPNet(p)}); err != nil {
					errs <- fmt.Errorf("add %s: %w", p, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	close(stop)
	<-busy
	<-busy
	t.Logf("10,000 addresses added in %v", time.Since(start))
	// A broken subscription logs its error before its channel closes, and
	// is renewed a second later with a call; the marker's call comes after
	// either (through the renewed subscription if the old one broke).
	other, err := netlink.LinkByName(node)
	if err != nil {
		t.Fatal(err)
	}
	if got := mark(t, calls, other) - base; got != 1 {
		t.Errorf("10,000 addresses on %s, then a marker: %d calls, want 1 (the marker's)", dummy, got)
	}
	if strings.Contains(log.String(), "Address subscription error") {
		t.Errorf("10,000 addresses on %s broke the subscription:\n%s", dummy, log)
	}
}
