package policy

import (
	"fmt"
	"strings"
	"testing"
)

func TestTieredTrafficPolicies(t *testing.T) {
	pl := annotate(AnnotationTrafficPolicy, "PreferLocal")
	pz := annotate(AnnotationTrafficPolicy, "PreferZone")
	keys := func(k string) svcOpt { return annotate(AnnotationTopologyKeys, k) }
	tests := []struct {
		name       string
		svc        []svcOpt
		eps        []Endpoint
		wantDests  string
		wantReason string
	}{
		{
			name:       "PreferLocal: this node's ready endpoints first",
			svc:        []svcOpt{pl},
			eps:        []Endpoint{ep("10.0.0.1", local()), ep("10.0.0.2", on("node-b", thisZone)), ep("10.0.0.3")},
			wantDests:  "10.0.0.1:8080",
			wantReason: "PreferLocal: tier 0 (node-a) 1/1 ready",
		},
		{
			name:       "PreferLocal: no local ready endpoint falls to the rest of the zone",
			svc:        []svcOpt{pl},
			eps:        []Endpoint{ep("10.0.0.1", local(), notReady), ep("10.0.0.2", on("node-b", thisZone)), ep("10.0.0.3", on("node-c", thisZone), notReady), ep("10.0.0.4")},
			wantDests:  "10.0.0.2:8080",
			wantReason: "PreferLocal: tier 1 (zone-a) 1/2 ready",
		},
		{
			name:       "PreferLocal: no zone endpoint falls to everything else",
			svc:        []svcOpt{pl},
			eps:        []Endpoint{ep("10.0.0.3"), ep("10.0.0.4", on("node-d", "zone-c"))},
			wantDests:  "10.0.0.3:8080 10.0.0.4:8080",
			wantReason: "PreferLocal: tier 2 (*) 2/2 ready",
		},
		{
			name:       "PreferLocal: tiers never overlap, a local endpoint is not in the zone tier",
			svc:        []svcOpt{pl, annotate(AnnotationOverprovision, "1")},
			eps:        []Endpoint{ep("10.0.0.1", local()), ep("10.0.0.2", local(), notReady), ep("10.0.0.3", on("node-b", thisZone))},
			wantDests:  "10.0.0.1:8080=5000 10.0.0.3:8080=5000",
			wantReason: "PreferLocal spill f=1: tier 0 (node-a) 1/2 ready share 0.5000, tier 1 (zone-a) 1/1 ready share 0.5000",
		},
		{
			name:       "PreferLocal: terminating fallback uses the first tier with serving-terminating endpoints",
			svc:        []svcOpt{pl},
			eps:        []Endpoint{ep("10.0.0.1", local(), terminatingDead), ep("10.0.0.2", on("node-b", thisZone), terminating), ep("10.0.0.3", terminating)},
			wantDests:  "10.0.0.2:8080",
			wantReason: "PreferLocal: no ready endpoints; tier 1 (zone-a) 1/1 serving-terminating",
		},
		{
			name:       "PreferLocal: serving-terminating endpoints are not used while any endpoint is ready",
			svc:        []svcOpt{pl},
			eps:        []Endpoint{ep("10.0.0.1", local(), terminating), ep("10.0.0.3")},
			wantDests:  "10.0.0.3:8080",
			wantReason: "PreferLocal: tier 2 (*) 1/1 ready",
		},
		{
			name:       "PreferLocal ignores topology hints",
			svc:        []svcOpt{pl},
			eps:        []Endpoint{ep("10.0.0.1", local(), zones("zone-b")), ep("10.0.0.2", zones(thisZone))},
			wantDests:  "10.0.0.1:8080",
			wantReason: "PreferLocal: tier 0 (node-a) 1/1 ready",
		},
		{
			name:       "PreferZone: this zone, this node included, first",
			svc:        []svcOpt{pz},
			eps:        []Endpoint{ep("10.0.0.1", local()), ep("10.0.0.2", on("node-b", thisZone)), ep("10.0.0.3")},
			wantDests:  "10.0.0.1:8080 10.0.0.2:8080",
			wantReason: "PreferZone: tier 0 (zone-a) 2/2 ready",
		},
		{
			name:       "PreferZone: no zone endpoint falls to everything else",
			svc:        []svcOpt{pz},
			eps:        []Endpoint{ep("10.0.0.2", on("node-b", thisZone), notReady), ep("10.0.0.3")},
			wantDests:  "10.0.0.3:8080",
			wantReason: "PreferZone: tier 1 (*) 1/1 ready",
		},
		{
			name:       "iTP=Local overrides PreferLocal",
			svc:        []svcOpt{pl, internalLocal},
			eps:        []Endpoint{ep("10.0.0.2", on("node-b", thisZone))},
			wantDests:  "",
			wantReason: "iTP=Local; no local endpoints",
		},
		{
			name:       "topology-keys: the first key this node shares with endpoints' nodes",
			svc:        []svcOpt{keys("kubernetes.io/hostname,topology.kubernetes.io/zone,*")},
			eps:        []Endpoint{ep("10.0.0.2", on("node-b", "")), ep("10.0.0.3", on("node-c", ""))},
			wantDests:  "10.0.0.2:8080",
			wantReason: "topology-keys: tier 1 (topology.kubernetes.io/zone=zone-a) 1/1 ready",
		},
		{
			name:       "topology-keys: * holds every remaining endpoint",
			svc:        []svcOpt{keys("kubernetes.io/hostname,*")},
			eps:        []Endpoint{ep("10.0.0.2", on("node-b", "")), ep("10.0.0.3", on("node-c", "")), ep("10.0.0.4", on("", ""))},
			wantDests:  "10.0.0.2:8080 10.0.0.3:8080 10.0.0.4:8080",
			wantReason: "topology-keys: tier 1 (*) 3/3 ready",
		},
		{
			name:       "topology-keys without *: endpoints matching no key are never used",
			svc:        []svcOpt{keys("kubernetes.io/hostname,topology.kubernetes.io/zone")},
			eps:        []Endpoint{ep("10.0.0.3", on("node-c", "")), ep("10.0.0.4", on("node-unknown", ""))},
			wantDests:  "",
			wantReason: "topology-keys: no tier has a ready endpoint",
		},
		{
			name:       "topology-keys: an empty label on this node never matches",
			svc:        []svcOpt{keys("example.com/rack,*")},
			eps:        []Endpoint{ep("10.0.0.2", on("node-b", "")), ep("10.0.0.3", on("node-c", ""))},
			wantDests:  "10.0.0.2:8080 10.0.0.3:8080",
			wantReason: "topology-keys: tier 1 (*) 2/2 ready",
		},
		{
			name:       "topology-keys: an endpoint on a node without the label never matches",
			svc:        []svcOpt{keys("topology.kubernetes.io/zone")},
			eps:        []Endpoint{ep("10.0.0.2", on("node-b", thisZone)), ep("10.0.0.5", on("node-e", thisZone))},
			wantDests:  "10.0.0.2:8080",
			wantReason: "topology-keys: tier 0 (topology.kubernetes.io/zone=zone-a) 1/1 ready",
		},
		{
			name:       "topology-keys win over traffic-policy",
			svc:        []svcOpt{pl, keys("topology.kubernetes.io/zone,*")},
			eps:        []Endpoint{ep("10.0.0.1", local()), ep("10.0.0.2", on("node-b", ""))},
			wantDests:  "10.0.0.1:8080 10.0.0.2:8080",
			wantReason: "topology-keys: tier 0 (topology.kubernetes.io/zone=zone-a) 2/2 ready",
		},
		{
			name:       "an unknown traffic-policy is ignored: plain cluster selection",
			svc:        []svcOpt{annotate(AnnotationTrafficPolicy, "Nearest")},
			eps:        []Endpoint{ep("10.0.0.1", local()), ep("10.0.0.2")},
			wantDests:  "10.0.0.1:8080 10.0.0.2:8080",
			wantReason: "iTP=Cluster; no topology hints; 2 ready endpoints",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newEngine(t, world{
				nodes: []*Node{node(thisNode, thisZone), node("node-b", thisZone), node("node-c", "zone-b"),
					{Name: "node-e"}},
				svcs:   []*Service{svc("web", tc.svc...)},
				slices: []*EndpointSlice{slice("web", "web-1", tc.eps...)},
			})
			plan, _ := e.Compute()
			vs := vsOf(t, plan, KindClusterIP)
			if got := dests(vs.Destinations); got != tc.wantDests {
				t.Errorf("destinations:\n got %q\nwant %q", got, tc.wantDests)
			}
			if vs.Reason != tc.wantReason {
				t.Errorf("reason:\n got %q\nwant %q", vs.Reason, tc.wantReason)
			}
		})
	}
}

// tierEndpoints makes n endpoints on one node: ready ones, then
// unready ones, then terminating ones.
func tierEndpoints(octet int, nodeName string, ready, unready, term int) []Endpoint {
	var eps []Endpoint
	for i := 0; i < ready+unready+term; i++ {
		e := ep(fmt.Sprintf("10.%d.%d.%d", octet, i/250, i%250+1), on(nodeName, ""))
		switch {
		case i >= ready+unready:
			terminating(&e)
		case i >= ready:
			notReady(&e)
		}
		eps = append(eps, e)
	}
	return eps
}

// TestSpillFormula pins the overprovisioning formula: weights for tiers
// 0 (this node), 1 (node-b: same zone) and 2 (node-c: elsewhere) under
// PreferLocal.
func TestSpillFormula(t *testing.T) {
	type tier struct{ ready, unready, terminating int }
	tests := []struct {
		name    string
		factor  string
		tiers   [3]tier
		weights [3]int32 // per ready endpoint of the tier; 0 means none
		shares  string
	}{
		{name: "a healthy first tier takes all traffic", factor: "1",
			tiers: [3]tier{{2, 0, 0}, {3, 0, 0}, {1, 0, 0}}, weights: [3]int32{5000, 0, 0},
			shares: "tier 0 (node-a) 2/2 ready share 1.0000, tier 1 (zone-a) 3/3 ready share 0.0000, tier 2 (*) 1/1 ready share 0.0000"},
		{name: "health is f·ready/non-terminating, capped at 1", factor: "1.4",
			tiers: [3]tier{{1, 1, 0}, {2, 0, 0}, {1, 0, 0}}, weights: [3]int32{7000, 1500, 0},
			shares: "tier 0 (node-a) 1/2 ready share 0.7000, tier 1 (zone-a) 2/2 ready share 0.3000, tier 2 (*) 1/1 ready share 0.0000"},
		{name: "overprovisioning keeps a degraded tier whole", factor: "2",
			tiers: [3]tier{{1, 1, 0}, {2, 0, 0}, {1, 0, 0}}, weights: [3]int32{10000, 0, 0}},
		{name: "terminating endpoints do not count against health", factor: "1",
			tiers: [3]tier{{1, 0, 3}, {2, 0, 0}, {0, 0, 0}}, weights: [3]int32{10000, 0, 0}},
		{name: "spill cascades over several tiers", factor: "1",
			tiers: [3]tier{{1, 3, 0}, {1, 1, 0}, {2, 0, 0}}, weights: [3]int32{2500, 5000, 1250},
			shares: "tier 0 (node-a) 1/4 ready share 0.2500, tier 1 (zone-a) 1/2 ready share 0.5000, tier 2 (*) 2/2 ready share 0.2500"},
		{name: "shares are normalised when they sum below 1", factor: "1",
			tiers: [3]tier{{1, 3, 0}, {0, 2, 0}, {1, 3, 0}}, weights: [3]int32{5000, 0, 5000},
			shares: "tier 0 (node-a) 1/4 ready share 0.5000, tier 1 (zone-a) 0/2 ready share 0.0000, tier 2 (*) 1/4 ready share 0.5000"},
		{name: "a tier of only terminating endpoints has health 0", factor: "1",
			tiers: [3]tier{{0, 0, 2}, {1, 1, 0}, {0, 0, 0}}, weights: [3]int32{0, 10000, 0}},
		{name: "weights round half away from zero", factor: "1",
			tiers: [3]tier{{32, 0, 0}, {1, 0, 0}, {0, 0, 0}}, weights: [3]int32{313, 0, 0}},
		{name: "a tiny share still gets weight 1", factor: "1",
			tiers: [3]tier{{9999, 1, 0}, {3, 0, 0}, {0, 0, 0}}, weights: [3]int32{1, 1, 0}},
		{name: "a decimal factor above the ratio", factor: "1.25",
			tiers: [3]tier{{3, 2, 0}, {1, 0, 0}, {0, 0, 0}}, weights: [3]int32{2500, 2500, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var eps []Endpoint
			eps = append(eps, tierEndpoints(1, thisNode, tc.tiers[0].ready, tc.tiers[0].unready, tc.tiers[0].terminating)...)
			eps = append(eps, tierEndpoints(2, "node-b", tc.tiers[1].ready, tc.tiers[1].unready, tc.tiers[1].terminating)...)
			eps = append(eps, tierEndpoints(3, "node-c", tc.tiers[2].ready, tc.tiers[2].unready, tc.tiers[2].terminating)...)
			for i := range eps {
				node := eps[i].NodeName()
				eps[i].Place = at(node, map[string]string{thisNode: thisZone, "node-b": thisZone, "node-c": "zone-b"}[node])
			}
			e, _ := newEngine(t, world{
				svcs:   []*Service{svc("web", annotate(AnnotationTrafficPolicy, "PreferLocal", AnnotationOverprovision, tc.factor))},
				slices: []*EndpointSlice{slice("web", "web-1", eps...)},
			})
			plan, _ := e.Compute()
			vs := vsOf(t, plan, KindClusterIP)
			var got [3]int32
			perTier := map[byte]int{}
			for _, d := range vs.Destinations {
				tierIdx := d.Address.As4()[1] - 1
				if got[tierIdx] != 0 && got[tierIdx] != d.Weight {
					t.Fatalf("tier %d has unequal weights %d and %d", tierIdx, got[tierIdx], d.Weight)
				}
				got[tierIdx] = d.Weight
				perTier[tierIdx]++
			}
			if got != tc.weights {
				t.Errorf("weights per tier %v, want %v (reason %q)", got, tc.weights, vs.Reason)
			}
			for i, w := range tc.weights {
				if w > 0 && perTier[byte(i)] != tc.tiers[i].ready {
					t.Errorf("tier %d: %d destinations, want its %d ready endpoints", i, perTier[byte(i)], tc.tiers[i].ready)
				}
			}
			if tc.shares != "" && !strings.Contains(vs.Reason, tc.shares) {
				t.Errorf("reason %q lacks %q", vs.Reason, tc.shares)
			}
		})
	}
}

func TestSpillIsNotAppliedInTheTerminatingFallback(t *testing.T) {
	e, _ := newEngine(t, world{
		svcs: []*Service{svc("web", annotate(AnnotationTrafficPolicy, "PreferLocal", AnnotationOverprovision, "1.5"))},
		slices: []*EndpointSlice{slice("web", "web-1",
			ep("10.0.0.1", on("node-b", thisZone), terminating), ep("10.0.0.2", on("node-b", thisZone), terminating), ep("10.0.0.3", terminating))},
	})
	plan, _ := e.Compute()
	vs := vsOf(t, plan, KindClusterIP)
	if got, want := dests(vs.Destinations), "10.0.0.1:8080 10.0.0.2:8080"; got != want {
		t.Errorf("destinations %q, want %q", got, want)
	}
	if want := "PreferLocal: no ready endpoints; tier 1 (zone-a) 2/2 serving-terminating"; vs.Reason != want || vs.Scheduler != "rr" {
		t.Errorf("reason %q scheduler %s, want %q rr", vs.Reason, vs.Scheduler, want)
	}
}
