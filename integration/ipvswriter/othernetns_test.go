//go:build integration

package ipvswriter

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	mobyipvs "github.com/moby/ipvs"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// manyServices is n ClusterIP virtual servers on 10.<b>.x.y:80/TCP with
// two destinations each.
func manyServices(b, n int) []policy.ServicePlan {
	var sps []policy.ServicePlan
	for i := range n {
		addr := fmt.Sprintf("10.%d.%d.%d:80/TCP", b, i/250, i%250+1)
		sps = append(sps, svc(fmt.Sprintf("s%d-%d", b, i), vs("ClusterIP "+addr, "10.244.1.5:8080", "10.244.1.6:8080")))
	}
	return sps
}

// TestCheckBesideAnotherNamespacesIPVS: with IPVS virtual servers in
// another network namespace (a pod's or a container runtime's; here a
// Writer's in a namespace of its own), Check calls nothing drift that is
// not: where the kernel's /proc/net/ip_vs listing strays into the other
// namespace's virtual servers (logged: the count of this namespace's
// then lists another number), the count is confirmed by a direct read
// and not trusted; a destination deleted by hand is still found. Once
// that Writer is closed and its thread gone, its namespace goes, with
// its virtual servers: the count lists this namespace's again. The
// Writer counts on a reader the test watches (countWatch), so that "no
// drift" is said only once Check has compared counts read beside the
// other namespace.
func TestCheckBesideAnotherNamespacesIPVS(t *testing.T) {
	h := clean(t)
	const n = 2000
	k, _, _, closeK, err := ipvs.NewLinuxAdapters()
	if err != nil {
		t.Fatal(err)
	}
	defer closeK()
	reader, _, _, closeReader, err := ipvs.NewLinuxAdapters()
	if err != nil {
		t.Fatal(err)
	}
	defer closeReader()
	watch := &countWatch{Kernel: reader, ours: n}
	w := newWriter(t, ipvs.Config{RepairReader: watch})
	if err := w.Resync(plan(manyServices(97, n)...)); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	if counts, err := k.DestinationCounts(); err != nil || len(counts) != n {
		t.Fatalf("count alone: %d virtual servers, %v; want %d", len(counts), err, n)
	}

	closeOther := otherNamespace(t, manyServices(98, n))
	counts, err := k.DestinationCounts()
	t.Logf("count beside the other namespace's %d virtual servers: %d listed, %d of them the other namespace's, for this namespace's %d (%v)",
		n, len(counts), othersListed(counts), n, err)

	// A count that a direct read contradicts is next made a minute
	// later (countCheckRetry), so this waits about that long.
	for start := time.Now(); time.Since(start) < 5*time.Second || watch.compared() < 1; time.Sleep(100 * time.Millisecond) {
		if err := w.Check(); err != nil {
			t.Fatalf("Check beside the other namespace: %v; want no drift", err)
		}
		if time.Since(start) > 3*time.Minute {
			t.Fatalf("Check compared no count of destinations in 3 min: the no-drift above proves nothing")
		}
	}
	compared, read, strayed := watch.seen()
	t.Logf("Check compared %d counts beside the other namespace without drift; %d of the %d read listed other than this namespace's %d virtual servers", compared, strayed, read, n)
	last := fmt.Sprintf("10.97.%d.%d", (n-1)/250, (n-1)%250+1)
	if err := h.DelDestination(mobyService(last, 80, unix.IPPROTO_TCP),
		&mobyipvs.Destination{Address: net.ParseIP("10.244.1.6").To4(), Port: 8080, AddressFamily: unix.AF_INET}); err != nil {
		t.Fatalf("DelDestination: %v", err)
	}
	found := false
	for start := time.Now(); time.Since(start) < 90*time.Second; time.Sleep(100 * time.Millisecond) {
		err := w.Check()
		if errors.Is(err, ipvs.ErrDrift) && strings.Contains(err.Error(), last+":80/TCP") {
			t.Logf("the deleted destination found %v after: %v", time.Since(start).Round(time.Millisecond), err)
			found = true
			break
		}
		if err != nil {
			t.Fatalf("Check: %v; want the drift of %s:80/TCP", err, last)
		}
	}
	if !found {
		t.Fatalf("the deleted destination of %s:80/TCP not found", last)
	}

	closeOther()
	for start := time.Now(); ; time.Sleep(time.Second) {
		counts, err := k.DestinationCounts()
		if err == nil && len(counts) == n && othersListed(counts) == 0 {
			t.Logf("the other namespace gone %v after its Writer closed", time.Since(start).Round(time.Millisecond))
			break
		}
		if time.Since(start) > 2*time.Minute {
			t.Fatalf("2 min after the other namespace's Writer closed, the count lists %d virtual servers (%v); want this namespace's %d: its namespace is still alive", len(counts), err, n)
		}
	}
}

// otherNamespace programs sps with a Writer of its own in a network
// namespace made for it, on a thread of its own. closeOther closes that
// Writer and ends the thread, and with it the namespace's last reference
// but the Writer's handles.
func otherNamespace(t *testing.T, sps []policy.ServicePlan) (closeOther func()) {
	t.Helper()
	programmed, release, gone := make(chan error, 1), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(gone)
		runtime.LockOSThread() // never unlocked: the thread, and its namespace, end with the goroutine
		ns, err := netns.New()
		if err != nil {
			programmed <- fmt.Errorf("new network namespace: %w", err)
			return
		}
		defer ns.Close()
		other, err := ipvs.NewLinux(ipvs.Config{})
		if err != nil {
			programmed <- fmt.Errorf("NewLinux in the other namespace: %w", err)
			return
		}
		defer other.Close()
		programmed <- other.Resync(plan(sps...))
		<-release
	}()
	if err := <-programmed; err != nil {
		t.Fatal(err)
	}
	return func() { close(release); <-gone }
}

// othersListed counts the other namespace's virtual servers (10.98.*) in
// a count.
func othersListed(counts map[ipvs.Key]int) int {
	n := 0
	for k := range counts {
		if strings.HasPrefix(k.Address.String(), "10.98.") {
			n++
		}
	}
	return n
}

// countWatch is the Writer's RepairReader with its counts of
// destinations watched. The Writer begins a count only once Check has
// taken the one before it, and compares what it takes unless the read
// failed (a Resync or a forgotten state overtaking it aside, which this
// test makes none of): so the counts read without error before the
// latest began were compared. stray counts the reads that listed other
// than this namespace's ours virtual servers (the listing strayed into
// the other namespace's).
type countWatch struct {
	ipvs.Kernel
	ours int

	mu                          sync.Mutex
	read, readBeforeLast, stray int
}

func (c *countWatch) DestinationCounts() (map[ipvs.Key]int, error) {
	c.mu.Lock()
	c.readBeforeLast = c.read
	c.mu.Unlock()
	counts, err := c.Kernel.DestinationCounts()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		c.read++
		if len(counts) != c.ours || othersListed(counts) > 0 {
			c.stray++
		}
	}
	return counts, err
}

// compared is how many counts Check compared, at least.
func (c *countWatch) compared() int {
	n, _, _ := c.seen()
	return n
}

func (c *countWatch) seen() (compared, read, strayed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readBeforeLast, c.read, c.stray
}
