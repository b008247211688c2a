package proxier

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// These tests run the whole loop: fake clientsets, real informers, the
// runner on the real clock (MinSyncPeriod 0).

// TestNew: New refuses each incomplete or inconsistent Config, saying
// what is wrong, and fills in every default of a Config it accepts.
func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr string // a substring of New's error; "" means accepted
	}{
		{"defaults", func(*Config) {}, ""},
		{"no node name", func(c *Config) { c.NodeName = "" }, "node name"},
		{"no client", func(c *Config) { c.Client = nil }, "a client and a metadata client"},
		{"no metadata client", func(c *Config) { c.MetadataClient = nil }, "a client and a metadata client"},
		{"no data plane", func(c *Config) { c.DataPlane = nil }, "data plane"},
		{"negative sync period", func(c *Config) { c.SyncPeriod = -time.Second }, "sync period -1s and"},
		{"negative config sync period", func(c *Config) { c.ConfigSyncPeriod = -time.Second }, "config sync period -1s"},
		{"negative min sync period", func(c *Config) { c.MinSyncPeriod = -time.Second }, "min sync period -1s"},
		{"min sync period above the sync period", func(c *Config) { c.MinSyncPeriod, c.SyncPeriod = time.Minute, time.Second },
			"min sync period 1m0s"},
		{"a scheduler that cannot be a kernel scheduler's name", func(c *Config) { c.Engine.Scheduler = "No Pe" }, `invalid scheduler "No Pe"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTestProxier(t, nil)
			cfg := tp.cfg
			cfg.SyncPeriod, cfg.ConfigSyncPeriod = 0, 0
			tc.mutate(&cfg)
			p, err := New(cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("New: err = %v, want one saying %q", err, tc.wantErr)
				}
				if p != nil {
					t.Errorf("New returned a Proxier with its error")
				}
				return
			}
			if err != nil || p == nil {
				t.Fatalf("New: %v, %v; want a Proxier", p, err)
			}
			got := p.cfg
			want := map[string][2]any{
				"SyncPeriod":       {got.SyncPeriod, DefaultSyncPeriod},
				"ConfigSyncPeriod": {got.ConfigSyncPeriod, DefaultConfigSyncPeriod},
				"ProbeInterval":    {got.ProbeInterval, DefaultProbeInterval},
				"NodeWatchLinger":  {got.NodeWatchLinger, DefaultNodeWatchLinger},
				"Engine.NodeName":  {got.Engine.NodeName, testNode},
			}
			for field, gw := range want {
				if gw[0] != gw[1] {
					t.Errorf("%s = %v, want %v", field, gw[0], gw[1])
				}
			}
			if p.nodes.linger != DefaultNodeWatchLinger || p.nodes.resync != DefaultConfigSyncPeriod {
				t.Errorf("node watch: linger %v, resync %v; want the defaults %v, %v",
					p.nodes.linger, p.nodes.resync, DefaultNodeWatchLinger, DefaultConfigSyncPeriod)
			}
		})
	}
}

func TestRunAgainstFakeAPI(t *testing.T) {
	ctx := context.Background()
	web := service("web", "10.96.0.10")
	tp := newTestProxier(t, nil, node(testNode, "192.168.0.10", nil), web, service("db", "10.96.0.20"),
		slice("web-1", "web", ep{"10.244.1.5", testNode}))
	tp.start(t)
	if got := describeAll(tp.dp.snapshot()); !cmp.Equal(got, []string{"Resync[2]"}) {
		t.Fatalf("first sync: got %v, want one Resync of both ClusterIPs", got)
	}
	eps := tp.client.DiscoveryV1().EndpointSlices("default")
	services := tp.client.CoreV1().Services("default")
	steps := []struct {
		name string
		act  func() error
		want []string
	}{
		{"an EndpointSlice change applies exactly its service",
			func() error {
				_, err := eps.Update(ctx, slice("web-1", "web", ep{"10.244.1.6", testNode}), metav1.UpdateOptions{})
				return err
			}, []string{"Apply default/web[1]"}},
		{"an annotation-only EndpointSlice update applies nothing",
			func() error {
				s := slice("web-1", "web", ep{"10.244.1.6", testNode})
				s.Annotations = map[string]string{"example.com/x": "y"}
				_, err := eps.Update(ctx, s, metav1.UpdateOptions{})
				return err
			}, []string{}},
		{"a Service delete applies an empty plan for it",
			func() error { return services.Delete(ctx, "db", metav1.DeleteOptions{}) },
			[]string{"Apply default/db[0]"}},
		{"an invalid annotation emits an Event and applies nothing else",
			func() error {
				svc := web.DeepCopy()
				svc.Annotations = map[string]string{policy.AnnotationNoTrack: "maybe"}
				_, err := services.Update(ctx, svc, metav1.UpdateOptions{})
				return err
			}, []string{}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			before, calls := tp.Stats().Syncs, len(tp.dp.snapshot())
			if err := st.act(); err != nil {
				t.Fatal(err)
			}
			tp.syncedAfter(t, before)
			if got := describeAll(tp.dp.snapshot()[calls:]); !cmp.Equal(got, st.want) {
				t.Errorf("data plane calls: got %v, want %v", got, st.want)
			}
		})
	}
	if got := tp.drainEvents(); len(got) != 1 {
		t.Errorf("events: got %q, want exactly one InvalidAnnotation", got)
	}
}

func TestRunPeriodicResync(t *testing.T) {
	tp := newTestProxier(t, func(c *Config) { c.SyncPeriod = 20 * time.Millisecond }, service("web", "10.96.0.10"))
	tp.start(t)
	waitFor(t, "three full syncs", func() bool { return tp.Stats().FullSyncs >= 3 })
	for _, c := range tp.dp.snapshot() {
		if !c.resync || len(c.plan.VirtualServers) != 1 {
			t.Fatalf("periodic sync: got %s, want Resync[1]", describe(c))
		}
	}
}

// TestRunNodeMetadataInformer: the informer over other nodes' labels runs
// only while a topology-keys service exists (and lingers a while after),
// and its labels drive the plan.
func TestRunNodeMetadataInformer(t *testing.T) {
	ctx := context.Background()
	zone := func(z string) map[string]string { return map[string]string{policy.LabelTopologyZone: z} }
	tp := newTestProxier(t, func(c *Config) { c.NodeWatchLinger = 300 * time.Millisecond }, node(testNode, "192.168.0.10", zone("z1")),
		slice("topo-1", "topo", ep{"10.244.2.5", "node-b"}, ep{"10.244.3.5", "node-c"}))
	for _, n := range []*metav1.PartialObjectMetadata{nodeMeta(testNode, zone("z1")), nodeMeta("node-b", zone("z1")), nodeMeta("node-c", zone("z2"))} {
		if err := tp.meta.Tracker().Add(n); err != nil {
			t.Fatal(err)
		}
	}
	tp.start(t)
	if s := tp.Stats(); s.NodeInformer || s.NodeInformerStarts != 0 {
		t.Fatalf("node informer running without topology-keys services: %+v", s)
	}

	svc := service("topo", "10.96.0.50", annotated(policy.AnnotationTopologyKeys, policy.LabelTopologyZone))
	if _, err := tp.client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "node-b's endpoint only (same zone)", func() bool { return lastDestinations(tp, "topo") == "10.244.2.5" })
	if s := tp.Stats(); !s.NodeInformer || s.NodeInformerStarts != 1 {
		t.Errorf("node informer: %+v, want running, started once", s)
	}

	nodes := tp.meta.Resource(nodesResource).(metadatafake.MetadataClient)
	if _, err := nodes.UpdateFake(nodeMeta("node-c", zone("z1")), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "node-c's endpoint too after its zone changed", func() bool {
		return lastDestinations(tp, "topo") == "10.244.2.5 10.244.3.5"
	})

	if err := tp.client.CoreV1().Services("default").Delete(ctx, "topo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "node informer stopped", func() bool { s := tp.Stats(); return !s.NodeInformer && s.NodeInformerStops == 1 })
}

// TestNodeWatchDebounce: toggling the topology-keys annotation starts the
// watch of all Nodes once; it stops only after lingering unused, as the
// Proxier's clock counts: not a nanosecond before.
func TestNodeWatchDebounce(t *testing.T) {
	ctx := context.Background()
	const linger = 500 * time.Millisecond
	tp := newTestProxier(t, func(c *Config) { c.NodeWatchLinger = linger }, node(testNode, "192.168.0.10", nil),
		service("topo", "10.96.0.50"))
	clk := testingclock.NewFakeClock(t0)
	tp.setClock(clk)
	tp.start(t)
	hasTopology := func() bool {
		tp.t.mu.Lock()
		defer tp.t.mu.Unlock()
		return len(tp.t.topo) > 0
	}
	svcs := tp.client.CoreV1().Services("default")
	for i := range 6 {
		s := service("topo", "10.96.0.50")
		on := i%2 == 0
		if on {
			s = service("topo", "10.96.0.50", annotated(policy.AnnotationTopologyKeys, policy.LabelTopologyZone))
		}
		if _, err := svcs.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The marker: the tracker has the update, and the watch was set
		// with it in the same handler.
		waitFor(t, fmt.Sprintf("toggle %d handled", i), func() bool { return hasTopology() == on })
	}
	if s := tp.Stats(); !s.NodeInformer || s.NodeInformerStarts != 1 || s.NodeInformerStops != 0 {
		t.Errorf("after 3 toggles: %+v, want started once, still running", s)
	}
	clk.Step(linger - time.Nanosecond)
	if s := tp.Stats(); !s.NodeInformer || s.NodeInformerStops != 0 {
		t.Errorf("a nanosecond before lingering %v: %+v, want still running", linger, s)
	}
	clk.Step(time.Nanosecond) // the stop runs in Step, on this goroutine
	if s := tp.Stats(); s.NodeInformer || s.NodeInformerStops != 1 || s.NodeInformerStarts != 1 {
		t.Errorf("after lingering %v: %+v, want stopped once, started once", linger, s)
	}
}

// lastDestinations renders the ClusterIP destinations of the last data
// plane call that carried svc.
func lastDestinations(tp *testProxier, svc string) string {
	calls := tp.dp.snapshot()
	for i := len(calls) - 1; i >= 0; i-- {
		vss := calls[i].plan.VirtualServers
		for _, sp := range calls[i].changes {
			vss = append(vss, sp.VirtualServers...)
		}
		for _, vs := range vss {
			if vs.Service == (policy.ServiceKey{Namespace: "default", Name: svc}) && vs.Kind == policy.KindClusterIP {
				var out []string
				for _, d := range vs.Destinations {
					out = append(out, d.Address.String())
				}
				slices.Sort(out)
				return strings.Join(out, " ")
			}
		}
	}
	return "<none>"
}

// TestRunUnreachableAPIServer: while the apiserver cannot be listed,
// nothing is programmed (no sync from empty caches, which would flush
// every service); once it answers, the first sync is the full plan. On
// exit nothing is flushed either.
func TestRunUnreachableAPIServer(t *testing.T) {
	tp := newTestProxier(t, nil, service("web", "10.96.0.10"))
	// The first LIST of services fails; the informer retries after its
	// backoff (most of a second), and that LIST succeeds. Each records how
	// many data plane calls came before it, so "nothing programmed while
	// unreachable" is read at the moment the apiserver answers, with no
	// sleep: a loop that synced from empty caches would have done so
	// long before.
	var (
		mu      sync.Mutex
		lists   int
		callsAt []int // data plane calls before each LIST
	)
	tp.client.PrependReactor("list", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		n := len(tp.dp.snapshot())
		mu.Lock()
		defer mu.Unlock()
		lists++
		callsAt = append(callsAt, n)
		if lists == 1 {
			return true, nil, errBoom
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tp.Run(ctx) }()
	waitFor(t, "first sync after the apiserver answers", func() bool { return tp.Stats().Syncs >= 1 })
	mu.Lock()
	if len(callsAt) < 2 || callsAt[0] != 0 || callsAt[1] != 0 {
		t.Errorf("programmed while the apiserver was unreachable: data plane calls before the failed LIST and the "+
			"one that succeeded: %v, want [0 0] (%v)", callsAt, describeAll(tp.dp.snapshot()))
	}
	mu.Unlock()
	if got := describeAll(tp.dp.snapshot()); !cmp.Equal(got, []string{"Resync[1]"}) {
		t.Errorf("first sync: got %v, want Resync[1]", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if got := describeAll(tp.dp.snapshot()); !cmp.Equal(got, []string{"Resync[1]"}) {
		t.Errorf("after exit: got %v, want nothing more", got)
	}
}

// TestRunHealthSeams: the loop drives Health, ServiceHealth and SyncNode
// while syncs succeed, and while they fail.
func TestRunHealthSeams(t *testing.T) {
	t.Run("syncing", runHealthSeamsSyncing)
	t.Run("failing syncs", runHealthSeamsFailingSyncs)
}

func runHealthSeamsSyncing(t *testing.T) {
	lb := service("lb", "10.96.0.40", localLB(32000, "203.0.113.1"))
	tp := newTestProxier(t, nil, node(testNode, "192.168.0.10", nil), lb, slice("lb-1", "lb", ep{"10.244.1.9", testNode}))
	tp.start(t)
	s := tp.seams
	waitFor(t, "health calls", func() bool { return s.get("Updated") >= 1 && s.get("SyncEndpoints") >= 1 })
	s.mu.Lock()
	defer s.mu.Unlock()
	if !cmp.Equal(s.hcPorts, map[policy.ServiceKey]uint16{key("lb"): 32000}) ||
		!cmp.Equal(s.localReady, map[policy.ServiceKey]int{key("lb"): 1}) {
		t.Errorf("service health: ports %v local ready %v", s.hcPorts, s.localReady)
	}
	if len(s.nodes) == 0 || s.nodes[0].Name != testNode {
		t.Errorf("SyncNode: got %v, want this node", s.nodes)
	}
	if s.calls["QueuedUpdate"] == 0 {
		t.Error("QueuedUpdate never called")
	}
}

// runHealthSeamsFailingSyncs: while every sync fails, Health is told the
// first sync is pending (at start) and never that one applied, so it
// turns unhealthy after its timeout; the failing sync is retried with
// backoff, without any change, and the first success reports Updated.
func runHealthSeamsFailingSyncs(t *testing.T) {
	tp := newTestProxier(t, nil, node(testNode, "192.168.0.10", nil), service("web", "10.96.0.10"))
	tp.dp.set(errBoom, true)
	tp.start(t)
	s := tp.seams
	if s.get("QueuedUpdate") == 0 {
		t.Error("QueuedUpdate not called at start: a first sync that never succeeds would look healthy")
	}
	waitFor(t, "a retry", func() bool { return tp.Stats().Syncs >= 2 })
	if got := s.get("Updated"); got != 0 {
		t.Errorf("Updated %d times while every sync failed", got)
	}
	if st := tp.Stats(); st.Failures != st.Syncs || st.FullSyncs != st.Syncs {
		t.Errorf("stats %+v: want every sync full and failed", st)
	}
	tp.dp.set(nil, false)
	waitFor(t, "Updated after a successful retry", func() bool { return s.get("Updated") >= 1 })
}
