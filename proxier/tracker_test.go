package proxier

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

func newTestTracker(t *testing.T) *tracker {
	t.Helper()
	e, err := policy.New(policy.Config{NodeName: testNode})
	if err != nil {
		t.Fatal(err)
	}
	return newTracker(e, testNode, serviceConv{}, t0)
}

func checkedOut(w work) []string {
	out := []string{}
	for _, sp := range w.plans {
		out = append(out, sp.Service.String())
	}
	return out
}

func TestTrackerMarks(t *testing.T) {
	topo := service("topo", "10.96.0.50", annotated(policy.AnnotationTopologyKeys, policy.LabelTopologyZone))
	tests := []struct {
		name string
		step func(tr *tracker) change
		want []string // services checked out by the next incremental sync
		// wantDirty is whether the event asked for a sync.
		wantDirty bool
	}{
		{"a Service marks itself",
			func(tr *tracker) change { return tr.upsertService(service("web", "10.96.0.10")) },
			[]string{"default/web"}, true},
		{"an EndpointSlice marks its service",
			func(tr *tracker) change { return tr.upsertSlice(slice("db-2", "db")) },
			[]string{"default/db"}, true},
		{"an EndpointSlice moving to another service marks both",
			func(tr *tracker) change { return tr.upsertSlice(slice("web-1", "db")) },
			[]string{"default/db", "default/web"}, true},
		{"a headless Service never seen marks nothing",
			func(tr *tracker) change {
				return tr.upsertService(service("headless", "None"))
			},
			[]string{}, false},
		{"this node marks every service",
			func(tr *tracker) change { return tr.upsertSelf(node(testNode, "192.168.0.10", nil)) },
			[]string{"default/db", "default/topo", "default/web"}, true},
		{"another node's Node object is ignored by the self handler",
			func(tr *tracker) change { return tr.upsertSelf(node("node-b", "192.168.0.11", nil)) },
			[]string{}, false},
		{"another node's addresses mark the services listing them",
			func(tr *tracker) change {
				tr.upsertService(service("ext", "10.96.0.30", func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.168.0.11"} }))
				tr.checkout(false, false)
				return tr.setNodeAddresses("node-b", []netip.Addr{netip.MustParseAddr("192.168.0.11")})
			},
			[]string{"default/ext"}, true},
		{"another node's addresses unchanged (a status report) mark nothing",
			func(tr *tracker) change {
				tr.upsertService(service("ext", "10.96.0.30", func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.168.0.11"} }))
				tr.setNodeAddresses("node-b", []netip.Addr{netip.MustParseAddr("192.168.0.11")})
				tr.checkout(false, false)
				return tr.setNodeAddresses("node-b", []netip.Addr{netip.MustParseAddr("192.168.0.11")})
			},
			[]string{}, false},
		{"another node's labels mark topology-keys services only",
			func(tr *tracker) change {
				tr.nodesSyncedGen(tr.nodesStarted())
				return tr.upsertOther(tr.nodeGen, "node-b", map[string]string{"a": "b"})
			},
			[]string{"default/topo"}, true},
		{"labels from a stopped informer are dropped",
			func(tr *tracker) change {
				gen := tr.nodesStarted()
				tr.nodesStopped()
				tr.checkout(false, false)
				return tr.upsertOther(gen, "node-b", map[string]string{"a": "b"})
			},
			[]string{}, false},
		{"topology-keys services wait for the node informer's first list",
			func(tr *tracker) change {
				tr.nodesStarted()
				tr.upsertService(service("web", "10.96.0.11"))
				return tr.upsertService(topo)
			},
			[]string{"default/web"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTestTracker(t)
			tr.upsertService(service("web", "10.96.0.10"))
			tr.upsertService(service("db", "10.96.0.20"))
			tr.upsertService(topo)
			tr.upsertSlice(slice("web-1", "web"))
			tr.checkout(true, false)
			c := tc.step(tr)
			if c.dirty != tc.wantDirty {
				t.Errorf("dirty = %v, want %v", c.dirty, tc.wantDirty)
			}
			if got := checkedOut(tr.checkout(false, false)); !cmp.Equal(got, tc.want) {
				t.Errorf("checked out %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTrackerHeldUntilNodesSynced(t *testing.T) {
	tr := newTestTracker(t)
	gen := tr.nodesStarted()
	tr.upsertService(service("topo", "10.96.0.50", annotated(policy.AnnotationTopologyKeys, "*")))
	tr.upsertSlice(withTrigger(slice("topo-1", "topo", ep{"10.244.2.5", "node-b"}), t0.Add(time.Second)))
	if got := checkedOut(tr.checkout(false, false)); len(got) != 0 {
		t.Fatalf("checked out %v before the node informer synced", got)
	}
	if c := tr.nodesSyncedGen(gen); !c.dirty {
		t.Error("the node informer's sync did not ask for a sync")
	}
	w := tr.checkout(false, false)
	if got := checkedOut(w); !cmp.Equal(got, []string{"default/topo"}) {
		t.Errorf("checked out %v after the node informer synced, want [default/topo]", got)
	}
	if len(w.triggers[key("topo")]) != 1 {
		t.Errorf("trigger times %v, want the held one", w.triggers)
	}
	// Stopping forgets other nodes' labels.
	tr.upsertOther(gen, "node-b", map[string]string{"zone": "z"})
	tr.nodesStopped()
	if len(tr.others) != 0 {
		t.Errorf("other nodes after stop: %v", tr.others)
	}
}
