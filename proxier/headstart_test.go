package proxier

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// TestDataPlaneHeadStartOnlyOnAColdNode: on a cold node the head start
// writes the table at once (filtering the virtual IPs, rejecting
// nothing) and leaves the virtual servers and addresses to its IPVS
// part; the Resync after it leaves both kernels as a Resync alone does.
// On a node programmed before, after a Resync, or when the table cannot
// be read, there is no head start and nothing is written.
func TestDataPlaneHeadStartOnlyOnAColdNode(t *testing.T) {
	full := webWithNodePort("10.244.1.5")
	empty := policy.Plan{Node: "node-a", VirtualServers: webPlan().VirtualServers}
	alone := newFakes(t)
	if err := alone.dp.Resync(full); err != nil {
		t.Fatal(err)
	}

	t.Run("cold node", func(t *testing.T) {
		f := newFakes(t)
		rest, err := f.dp.HeadStart(full.WithoutEndpoints())
		if err != nil || rest == nil {
			t.Fatalf("HeadStart = %v, %v; want its IPVS part", rest != nil, err)
		}
		if !f.hasTable() {
			t.Fatal("no table before the IPVS part")
		}
		if d := f.nft.Dump(); strings.Contains(d, "goto reject-packet") && strings.Contains(d, "10.96.0.1 . tcp . 80") {
			t.Errorf("the head start rejects a service whose endpoints are not listed yet:\n%s", d)
		}
		if got := f.virtualServers(t); len(got) != 0 {
			t.Errorf("virtual servers before the IPVS part: %v", got)
		}
		if err := rest(); err != nil {
			t.Fatal(err)
		}
		want := []string{"10.96.0.1:80/TCP", "192.168.100.1:30080/TCP"}
		if got := f.virtualServers(t); !cmp.Equal(got, want) {
			t.Errorf("virtual servers after the head start: %v, want %v", got, want)
		}
		if d := f.kernel.Dump(); strings.Contains(d, "10.244.1.5") {
			t.Errorf("the head start added a destination:\n%s", d)
		}
		if err := f.dp.Resync(full); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(alone.kernel.Dump()+alone.links.Dump(), f.kernel.Dump()+f.links.Dump()); diff != "" {
			t.Errorf("IPVS after head start and Resync (-Resync alone +got):\n%s", diff)
		}
		if diff := cmp.Diff(alone.nft.Dump(), f.nft.Dump()); diff != "" {
			t.Errorf("nftables after head start and Resync (-Resync alone +got):\n%s", diff)
		}
		if rest, err := f.dp.HeadStart(full.WithoutEndpoints()); rest != nil || err != nil {
			t.Errorf("a second HeadStart = %v, %v; want none", rest != nil, err)
		}
	})
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, f *fakes)
		wantErr string
	}{
		{name: "restart on a programmed node", setup: func(t *testing.T, f *fakes) {
			if err := f.dp.Resync(empty); err != nil {
				t.Fatal(err)
			}
			f.restart()
		}},
		{name: "after a Resync", setup: func(t *testing.T, f *fakes) {
			if err := f.dp.Resync(empty); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "the table cannot be read", setup: func(t *testing.T, f *fakes) { f.nft.FailNextRead(errBoom) },
			wantErr: "nftables: list chains of family inet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakes(t)
			tc.setup(t, &f)
			nftBefore, ipvsBefore, flushes := f.nft.Dump(), f.kernel.Dump()+f.links.Dump(), f.nft.Flushes()
			rest, err := f.dp.HeadStart(full.WithoutEndpoints())
			if rest != nil {
				t.Error("HeadStart gave an IPVS part")
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("HeadStart: %v, want error %q", err, tc.wantErr)
			}
			if f.nft.Flushes() != flushes || f.nft.Dump() != nftBefore || f.kernel.Dump()+f.links.Dump() != ipvsBefore {
				t.Error("HeadStart changed the kernel")
			}
			if err := f.dp.Resync(full); err != nil {
				t.Fatalf("Resync after no head start: %v", err)
			}
		})
	}
}

// headStartDataPlane is a fakeDataPlane with a head start that records
// its plan; its IPVS part blocks until release is closed.
type headStartDataPlane struct {
	*fakeDataPlane
	cold    bool
	mu      sync.Mutex
	plans   []policy.Plan
	release chan struct{}
	restRan bool
}

func (f *headStartDataPlane) Cold() (bool, error) { return f.cold, nil }

func (f *headStartDataPlane) HeadStart(plan policy.Plan) (func() error, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.plans = append(f.plans, plan)
	return func() error {
		<-f.release
		f.mu.Lock()
		f.restRan = true
		f.mu.Unlock()
		return nil
	}, nil
}

// listOrder records, in order, the resources the informers list.
func listOrder(tp *testProxier) func() []string {
	var mu sync.Mutex
	var order []string
	tp.client.PrependReactor("list", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, a.GetResource().Resource)
		return false, nil, nil
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(order)
	}
}

// TestRunGivesAHeadStartWhileSlicesAreListed: on a cold node the
// EndpointSlices are listed only after the Services and the node; once
// those are, and while the EndpointSlices are not, the loop hands the
// data plane the plan without endpoints; the first sync is still the
// whole plan, and Run waits for the head start before it returns.
func TestRunGivesAHeadStartWhileSlicesAreListed(t *testing.T) {
	hs := &headStartDataPlane{fakeDataPlane: &fakeDataPlane{}, cold: true, release: make(chan struct{})}
	tp := newTestProxier(t, func(c *Config) { c.DataPlane = hs }, node(testNode, "192.168.0.10", nil),
		service("web", "10.96.0.10"), service("db", "10.96.0.20"), slice("web-1", "web", ep{"10.244.1.5", testNode}))
	// The first Services list fails, so that the Services are listed
	// after a retry: the EndpointSlices must still wait for them.
	var servicesFailed atomic.Bool
	tp.client.PrependReactor("list", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		if servicesFailed.CompareAndSwap(false, true) {
			return true, nil, errBoom
		}
		return false, nil, nil
	})
	// Fails until listed (a reactor must not block: the fake clientset
	// runs them under its lock).
	var listed atomic.Bool
	tp.client.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		if !listed.Load() {
			return true, nil, errBoom
		}
		return false, nil, nil
	})
	order := listOrder(tp) // first in the chain: it sees every attempt
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tp.Run(ctx) }()
	waitFor(t, "the head start", func() bool {
		hs.mu.Lock()
		defer hs.mu.Unlock()
		return len(hs.plans) == 1
	})
	plan := hs.plans[0]
	if len(plan.VirtualServers) != 2 {
		t.Fatalf("head start plan: %d virtual servers, want 2", len(plan.VirtualServers))
	}
	for _, vs := range plan.VirtualServers {
		if len(vs.Destinations) != 0 || vs.WhenEmpty != "" {
			t.Errorf("head start virtual server %s has destinations %v, WhenEmpty %q", vs.Key(), vs.Destinations, vs.WhenEmpty)
		}
	}
	if calls := hs.snapshot(); len(calls) != 0 {
		t.Errorf("synced before the EndpointSlices were listed: %v", describeAll(calls))
	}
	listed.Store(true)
	waitFor(t, "first sync", func() bool { return tp.Stats().Syncs >= 1 })
	calls := hs.snapshot()
	if got := describeAll(calls); !cmp.Equal(got, []string{"Resync[2]"}) {
		t.Fatalf("first sync: %v, want Resync[2]", got)
	}
	if n := len(calls[0].plan.VirtualServers[0].Destinations); n != 1 { // 10.96.0.10, web
		t.Errorf("first sync: web has %d destinations, want 1", n)
	}
	cancel()
	select {
	case err := <-done:
		t.Fatalf("Run returned (%v) before the head start ended", err)
	default:
	}
	close(hs.release)
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if !hs.restRan || len(hs.plans) != 1 {
		t.Errorf("head start part ran %v, head starts %d; want true, 1", hs.restRan, len(hs.plans))
	}
	// Every attempt: the Services' failed list and its retry, the
	// EndpointSlices' failed lists and the last one.
	got := order()
	first := slices.Index(got, "endpointslices")
	if first < 0 || slices.Contains(got[first:], "services") || slices.Contains(got[first:], "nodes") {
		t.Errorf("lists in the order %v; want the EndpointSlices after the Services and the nodes", got)
	}
}

// TestRunOnAProgrammedNodeGivesNoHeadStart: on a node programmed before,
// there is no head start; the first sync is the whole plan.
func TestRunOnAProgrammedNodeGivesNoHeadStart(t *testing.T) {
	hs := &headStartDataPlane{fakeDataPlane: &fakeDataPlane{}, release: make(chan struct{})}
	close(hs.release)
	tp := newTestProxier(t, func(c *Config) { c.DataPlane = hs }, node(testNode, "192.168.0.10", nil),
		service("web", "10.96.0.10"), slice("web-1", "web", ep{"10.244.1.5", testNode}))
	tp.start(t)
	if got := describeAll(hs.snapshot()); !cmp.Equal(got, []string{"Resync[1]"}) {
		t.Errorf("first sync: %v, want Resync[1]", got)
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if len(hs.plans) != 0 {
		t.Errorf("%d head starts on a programmed node", len(hs.plans))
	}
}
