package proxier

import (
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
	"weak"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/apiconv"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// These tests drive the handlers and the sync directly, without
// informers or the runner's goroutine: each step is followed by one
// sync, and the data plane calls after the initial one are compared.

func (tp *testProxier) svc(s *corev1.Service)              { tp.onService(s) }
func (tp *testProxier) delSvc(name string)                 { tp.onServiceDelete("default", name) }
func (tp *testProxier) slice(s *discoveryv1.EndpointSlice) { tp.queued(tp.t.upsertSlice(s)) }
func (tp *testProxier) delSlice(name string)               { tp.queued(tp.t.deleteSlice("default", name)) }
func (tp *testProxier) self(n *corev1.Node)                { tp.onNode(n) }
func (tp *testProxier) syncNow(periodic bool)              { _ = tp.sync(periodic) }

// describe renders a data plane call as "Resync[n]" (virtual servers)
// or "Apply ns/name[n] ..." (virtual servers per service).
func describe(c dpCall) string {
	if c.repair != "" {
		return c.repair
	}
	if c.resync {
		return fmt.Sprintf("Resync[%d]", len(c.plan.VirtualServers))
	}
	var parts []string
	for _, sp := range c.changes {
		parts = append(parts, fmt.Sprintf("%s[%d]", sp.Service, len(sp.VirtualServers)))
	}
	return "Apply " + strings.Join(parts, " ")
}

func describeAll(calls []dpCall) []string {
	out := []string{}
	for _, c := range calls {
		out = append(out, describe(c))
	}
	return out
}

// baseline: web (ClusterIP + NodePort) and db (ClusterIP), one endpoint
// each, and this node with one address.
func baseline(tp *testProxier) {
	tp.self(node(testNode, "192.168.0.10", map[string]string{policy.LabelTopologyZone: "z1"}))
	tp.svc(service("web", "10.96.0.10", func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.Ports[0].NodePort = 30080
	}))
	tp.svc(service("db", "10.96.0.20"))
	tp.slice(slice("web-1", "web", ep{"10.244.1.5", testNode}))
	tp.slice(slice("db-1", "db", ep{"10.244.2.5", "node-b"}))
}

// syncRules: each step is followed by one incremental (or periodic)
// sync; want is the data plane calls after the initial one.
var syncRules = []struct {
	name     string
	step     func(tp *testProxier)
	periodic bool
	want     []string
}{
	{name: "an EndpointSlice change applies exactly its service",
		step: func(tp *testProxier) {
			tp.slice(slice("web-1", "web", ep{"10.244.1.5", testNode}, ep{"10.244.1.6", "node-b"}))
		},
		want: []string{"Apply default/web[2]"}},
	{name: "an annotation-only EndpointSlice update applies nothing",
		step: func(tp *testProxier) {
			s := slice("db-1", "db", ep{"10.244.2.5", "node-b"})
			s.Annotations = map[string]string{"example.com/note": "x"}
			tp.slice(s)
		},
		want: []string{}},
	{name: "a change of the reason only applies nothing",
		step: func(tp *testProxier) {
			tp.svc(service("local", "10.96.0.30", func(s *corev1.Service) {
				s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
			}))
			tp.slice(slice("local-1", "local", ep{"10.244.1.7", testNode}))
			tp.syncNow(false)
			tp.slice(slice("local-1", "local", ep{"10.244.1.7", testNode}, ep{"10.244.2.7", "node-b"}))
		},
		want: []string{"Apply default/local[1]"}}, // the first sync only
	{name: "a Service delete applies an empty plan for it",
		step: func(tp *testProxier) { tp.delSvc("web") },
		want: []string{"Apply default/web[0]"}},
	{name: "an invalid Service update keeps the previous plan",
		step: func(tp *testProxier) {
			tp.svc(service("web", "10.96.0.10", func(s *corev1.Service) { s.Spec.ClusterIPs = []string{"10.96.0.10", "bogus"} }))
		},
		want: []string{}},
	{name: "a Service becoming another proxy's is removed",
		step: func(tp *testProxier) {
			tp.svc(service("db", "10.96.0.20", func(s *corev1.Service) {
				s.Labels = map[string]string{apiconv.LabelServiceProxyName: "other"}
			}))
		},
		want: []string{"Apply default/db[0]"}},
	{name: "an invalid EndpointSlice keeps the previous endpoints",
		step: func(tp *testProxier) {
			s := slice("db-1", "db", ep{"10.244.2.5", "node-b"})
			s.Endpoints[0].Addresses = []string{"not-an-ip"}
			tp.slice(s)
		},
		want: []string{}},
	{name: "an EndpointSlice delete applies its service",
		step: func(tp *testProxier) { tp.delSlice("db-1") },
		want: []string{"Apply default/db[1]"}},
	{name: "this node's new address applies only NodePort services",
		step: func(tp *testProxier) {
			tp.self(node(testNode, "192.168.0.11", map[string]string{policy.LabelTopologyZone: "z1"}))
		},
		want: []string{"Apply default/web[2]"}},
	{name: "an unchanged Node applies nothing",
		step: func(tp *testProxier) {
			tp.self(node(testNode, "192.168.0.10", map[string]string{policy.LabelTopologyZone: "z1"}))
		},
		want: []string{}},
	{name: "a periodic sync is a Resync",
		periodic: true,
		want:     []string{"Resync[3]"}},
	{name: "NeedsResync makes the next sync a Resync",
		step: func(tp *testProxier) {
			tp.dp.set(nil, true)
			tp.delSlice("db-1")
		},
		want: []string{"Resync[3]"}},
	{name: "a failed sync makes the next one a Resync",
		step: func(tp *testProxier) {
			tp.dp.set(errBoom, false)
			tp.delSlice("db-1")
			tp.syncNow(false)
			tp.dp.set(nil, false)
			tp.slice(slice("db-1", "db", ep{"10.244.2.5", "node-b"}))
		},
		want: []string{"Apply default/db[1]", "Resync[3]"}},
}

func TestSyncRules(t *testing.T) {
	for _, tc := range syncRules {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTestProxier(t, nil)
			baseline(tp)
			tp.syncNow(false)
			if got := describeAll(tp.dp.snapshot()); !cmp.Equal(got, []string{"Resync[3]"}) {
				t.Fatalf("initial sync: got %v, want one Resync with web's ClusterIP and NodePort and db's ClusterIP", got)
			}
			before := len(tp.dp.snapshot())
			if tc.step != nil {
				tc.step(tp)
			}
			tp.syncNow(tc.periodic)
			if got := describeAll(tp.dp.snapshot()[before:]); !cmp.Equal(got, tc.want) {
				t.Errorf("data plane calls after the initial sync:\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}

// TestInitialResyncPlan checks the content of the first Resync and that
// a later incremental Apply carries the service's whole new plan.
func TestInitialResyncPlan(t *testing.T) {
	tp := newTestProxier(t, nil)
	baseline(tp)
	tp.syncNow(false)
	plan := tp.dp.snapshot()[0].plan
	var got []string
	for _, vs := range plan.VirtualServers {
		got = append(got, fmt.Sprintf("%s %s %s:%d -> %v", vs.Service, vs.Kind, vs.Address, vs.Port, vs.Destinations))
	}
	want := []string{
		"default/web ClusterIP 10.96.0.10:80 -> [{10.244.1.5 8080 true 1}]",
		"default/db ClusterIP 10.96.0.20:80 -> [{10.244.2.5 8080 false 1}]",
		"default/web NodePort 192.168.0.10:30080 -> [{10.244.1.5 8080 true 1}]",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("initial plan (-want +got):\n%s", diff)
	}
	if s := tp.Stats(); s.Syncs != 1 || s.FullSyncs != 1 || !s.LastFull {
		t.Errorf("stats after the first sync: %+v", s)
	}

	tp.slice(slice("db-1", "db", ep{"10.244.2.6", "node-b"}))
	tp.syncNow(false)
	calls := tp.dp.snapshot()
	last := calls[len(calls)-1]
	if len(last.changes) != 1 || last.changes[0].VirtualServers[0].Destinations[0].Address != netip.MustParseAddr("10.244.2.6") {
		t.Errorf("apply: got %+v, want db's ClusterIP to 10.244.2.6", last.changes)
	}
	if s := tp.Stats(); !cmp.Equal(s.LastChanged, []policy.ServiceKey{key("db")}) || s.Applies != 1 {
		t.Errorf("stats: LastChanged %v Applies %d, want [default/db] 1", s.LastChanged, s.Applies)
	}
}

func TestNetworkProgrammingLatency(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := testingclock.NewFakeClock(t0)
	tp := newTestProxier(t, nil)
	tp.setClock(clk)
	baseline(tp)
	tp.syncNow(false)

	// Trigger times before the proxier started are not latencies.
	tp.slice(withTrigger(slice("db-1", "db", ep{"10.244.2.6", "node-b"}), t0.Add(-time.Minute)))
	tp.syncNow(false)
	// A change that alters no virtual server programs nothing.
	tp.slice(withTrigger(slice("db-1", "db", ep{"10.244.2.6", "node-b"}), t0.Add(time.Second)))
	tp.syncNow(false)
	// This one is programmed 2 s after it was triggered.
	tp.slice(withTrigger(slice("db-1", "db", ep{"10.244.2.7", "node-b"}), t0.Add(time.Second)))
	clk.Step(3 * time.Second)
	tp.syncNow(false)

	tp.seams.mu.Lock()
	defer tp.seams.mu.Unlock()
	if want := []time.Duration{2 * time.Second}; !cmp.Equal(tp.seams.latencies, want) {
		t.Errorf("latencies: got %v, want %v", tp.seams.latencies, want)
	}
}

func TestHealthAndObserverSeams(t *testing.T) {
	tp := newTestProxier(t, nil)
	baseline(tp)
	// An eTP=Local load balancer with its only endpoint on another node:
	// it drops external traffic here.
	tp.svc(service("lb", "10.96.0.40", localLB(32000, "203.0.113.1")))
	tp.slice(slice("lb-1", "lb", ep{"10.244.2.9", "node-b"}))
	tp.syncNow(false)

	s := tp.seams
	check := func(what string, got, want any) {
		t.Helper()
		if !cmp.Equal(got, want) {
			t.Errorf("%s: got %v, want %v", what, got, want)
		}
	}
	s.mu.Lock()
	check("SyncServices ports", s.hcPorts, map[policy.ServiceKey]uint16{key("lb"): 32000})
	check("SyncEndpoints local ready", s.localReady, map[policy.ServiceKey]int{key("lb"): 0})
	check("no local endpoints", s.noLocal, map[string]int{TrafficPolicyInternal: 0, TrafficPolicyExternal: 1})
	check("virtual servers by kind", s.byKind, map[policy.Kind]int{policy.KindClusterIP: 3, policy.KindNodePort: 2,
		policy.KindExternalIP: 0, policy.KindLoadBalancer: 1})
	check("SyncNode", len(s.nodes), 1)
	check("services changes total", s.svcTotal, 3)
	check("endpoint changes total", s.epTotal, 3)
	s.mu.Unlock()
	for name, want := range map[string]int{"SyncStarted": 1, "SyncDone": 1, "Updated": 1, "QueuedUpdate": 7,
		"Queued": 7, "SyncServices": 1, "SyncEndpoints": 1, "IPVSOps": 1, "Draining": 1} {
		check(name, s.get(name), want)
	}

	// A local endpoint appears: the health check reports it; an
	// unrelated change does not call ServiceHealth again.
	tp.slice(slice("lb-1", "lb", ep{"10.244.2.9", "node-b"}, ep{"10.244.1.9", testNode}))
	tp.syncNow(false)
	tp.slice(slice("db-1", "db", ep{"10.244.2.6", "node-b"}))
	tp.syncNow(false)
	s.mu.Lock()
	check("SyncEndpoints local ready", s.localReady, map[policy.ServiceKey]int{key("lb"): 1})
	check("no local endpoints", s.noLocal, map[string]int{TrafficPolicyInternal: 0, TrafficPolicyExternal: 0})
	s.mu.Unlock()
	check("SyncEndpoints calls", s.get("SyncEndpoints"), 2)
	check("Updated", s.get("Updated"), 3)

	// A failed sync does not report Updated.
	tp.dp.set(errBoom, false)
	tp.delSlice("db-1")
	tp.syncNow(false)
	check("Updated after a failure", s.get("Updated"), 3)
	check("failures", tp.Stats().Failures, 1)
}

func TestOnPlan(t *testing.T) {
	var plans []policy.Plan
	tp := newTestProxier(t, func(c *Config) { c.OnPlan = func(p policy.Plan) { plans = append(plans, p) } })
	baseline(tp)
	tp.syncNow(false)
	tp.delSvc("db")
	tp.syncNow(false)
	if len(plans) != 2 || len(plans[0].VirtualServers) != 3 || len(plans[1].VirtualServers) != 2 {
		t.Errorf("OnPlan: got %d plans %v, want the whole plan after each sync (3 then 2 virtual servers)", len(plans), plans)
	}
}

// TestReleaseMemoryAfterFullSyncsAndRepairs: with ReleaseMemory, a
// successful full sync and a periodic repair (which read or write the
// whole table) return the heap they freed to the OS; an incremental sync
// does not, nor does anything without ReleaseMemory.
func TestReleaseMemoryAfterFullSyncsAndRepairs(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint("ReleaseMemory=", on), func(t *testing.T) {
			var released atomic.Int32
			dp := &repairingDataPlane{fakeDataPlane: &fakeDataPlane{}, slices: 2}
			tp := newTestProxier(t, func(c *Config) { c.DataPlane, c.ReleaseMemory = dp, on })
			tp.dp = dp.fakeDataPlane
			tp.freeOSMemory = func() { released.Add(1) }
			// expect: a sync runs on this goroutine, and a release it starts
			// is under way (tp.releasing) from before the sync returns until
			// freeOSMemory has returned; once none is, the count is final.
			expect := func(what string, n int32) {
				t.Helper()
				if !on {
					n = 0
				}
				waitFor(t, "the release to finish", func() bool { return !tp.releasing.Load() })
				if got := released.Load(); got != n {
					t.Fatalf("after %s: %d releases, want %d", what, got, n)
				}
			}
			baseline(tp)
			tp.syncNow(false) // the first sync is full
			expect("the first (full) sync", 1)
			tp.slice(slice("db-1", "db", ep{"10.244.2.6", "node-b"}))
			tp.syncNow(false)
			expect("an incremental sync", 1)
			if err := tp.sync(true); err != nil {
				t.Fatalf("periodic sync: %v", err)
			}
			expect("a periodic repair", 2)
		})
	}
}

// TestTotalsCountEveryVirtualServer: the virtual servers gauge counts
// every virtual server of a service by kind, several of one kind
// included, and a service's summary taken back leaves the totals as they
// were.
func TestTotalsCountEveryVirtualServer(t *testing.T) {
	const other policy.Kind = "Other"
	sp := policy.ServicePlan{Service: key("web"), VirtualServers: []policy.VirtualServer{
		{Kind: policy.KindClusterIP}, {Kind: policy.KindClusterIP}, {Kind: policy.KindNodePort}, {Kind: other},
	}}
	st := newSyncState()
	ap := st.summary(sp)
	tests := []struct {
		name string
		sign int
		want map[policy.Kind]int
	}{
		{"added: two ClusterIPs, a NodePort, another kind", 1, map[policy.Kind]int{policy.KindClusterIP: 2, policy.KindNodePort: 1,
			policy.KindExternalIP: 0, policy.KindLoadBalancer: 0, other: 1}},
		{"taken back: every kind at zero", -1, map[policy.Kind]int{policy.KindClusterIP: 0, policy.KindNodePort: 0,
			policy.KindExternalIP: 0, policy.KindLoadBalancer: 0, other: 0}},
	}
	for _, tc := range tests {
		st.totals.add(ap, tc.sign)
		if !cmp.Equal(st.totals.byKind, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, st.totals.byKind, tc.want)
		}
	}
}

// TestAppliedPlanKeepsOtherKindsAside: the loop keeps an appliedPlan
// per service, so the kinds the engine does not make (counted above)
// take a pointer in it, not a list: 48 bytes a service, not 64.
func TestAppliedPlanKeepsOtherKindsAside(t *testing.T) {
	if size := unsafe.Sizeof(appliedPlan{}); size > 48 {
		t.Errorf("an appliedPlan is %d bytes, want at most 48", size)
	}
}

// heldPlanDataPlane is a fakeDataPlane whose Resync lets go of its plan
// and records whether the plan's lists are still reachable, then: still
// held by its caller.
type heldPlanDataPlane struct {
	*fakeDataPlane
	held []bool
}

func (d *heldPlanDataPlane) Resync(plan policy.Plan) error {
	if len(plan.VirtualServers) == 0 || len(plan.VirtualServers[0].Destinations) == 0 {
		return fmt.Errorf("a plan without a destination to watch: %v", plan)
	}
	vss, dests := weak.Make(&plan.VirtualServers[0]), weak.Make(&plan.VirtualServers[0].Destinations[0])
	plan = policy.Plan{}
	runtime.GC()
	d.held = append(d.held, vss.Value() != nil || dests.Value() != nil)
	return nil
}

// TestFullSyncLetsGoOfThePlanWhileTheWritersRun: a full sync hands the
// plan to the data plane and keeps neither its virtual servers nor their
// destinations meanwhile, so that the writers, which read it once, can
// drop it while they program the table; only OnPlan (--dry-run), which
// is given the plan after the sync, keeps it.
func TestFullSyncLetsGoOfThePlanWhileTheWritersRun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		onPlan bool
		held   bool
	}{
		{"without OnPlan, nothing holds the plan but the data plane", false, false},
		{"OnPlan is given the plan after the sync: it is held", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dp := &heldPlanDataPlane{fakeDataPlane: &fakeDataPlane{}}
			var given []policy.Plan
			tp := newTestProxier(t, func(c *Config) {
				c.DataPlane = dp
				if tc.onPlan {
					c.OnPlan = func(p policy.Plan) { given = append(given, p) }
				}
			})
			baseline(tp)
			if err := tp.sync(false); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(dp.held, []bool{tc.held}) {
				t.Errorf("plan held through the Resync: %v, want [%v]", dp.held, tc.held)
			}
			if tc.onPlan && (len(given) != 1 || len(given[0].VirtualServers) != 3) {
				t.Errorf("OnPlan given %v, want the plan of 3 virtual servers", given)
			}
		})
	}
}
