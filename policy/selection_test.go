package policy

import "testing"

// Markers for the zone label of this node in selection tests.
const (
	missingZone = "<missing>"
	emptyZone   = "<empty>"
)

// TestClusterAndLocalSelection pins kube-proxy's CategorizeEndpoints
// semantics, topology safeguards included, one rule per case.
func TestClusterAndLocalSelection(t *testing.T) {
	tests := []struct {
		name       string
		zone       string // this node's zone label: thisZone if empty; missingZone, emptyZone
		svc        []svcOpt
		eps        []Endpoint
		wantDests  string
		wantReason string
	}{
		{
			name:       "no hints: every ready endpoint, unready ones never",
			eps:        []Endpoint{ep("10.0.0.1"), ep("10.0.0.2"), ep("10.0.0.3", notReady)},
			wantDests:  "10.0.0.1:8080 10.0.0.2:8080",
			wantReason: "iTP=Cluster; no topology hints; 2 ready endpoints",
		},
		{
			name: "zone hints: only endpoints hinted for this zone",
			eps: []Endpoint{ep("10.0.0.1", zones(thisZone)), ep("10.0.0.2", zones("zone-b")),
				ep("10.0.0.3", zones(thisZone))},
			wantDests:  "10.0.0.1:8080 10.0.0.3:8080",
			wantReason: "iTP=Cluster; zone hints for zone-a; 2 of 3 ready endpoints",
		},
		{
			name:       "safeguard: one ready endpoint without a zone hint disables zone hints",
			eps:        []Endpoint{ep("10.0.0.1", zones(thisZone)), ep("10.0.0.2")},
			wantDests:  "10.0.0.1:8080 10.0.0.2:8080",
			wantReason: "iTP=Cluster; zone hints ignored: ready endpoint 10.0.0.2:8080 has no forZones; 2 ready endpoints",
		},
		{
			name:       "an unready endpoint without a hint does not disable zone hints",
			eps:        []Endpoint{ep("10.0.0.1", zones(thisZone)), ep("10.0.0.2", zones("zone-b")), ep("10.0.0.3", notReady)},
			wantDests:  "10.0.0.1:8080",
			wantReason: "iTP=Cluster; zone hints for zone-a; 1 of 2 ready endpoints",
		},
		{
			name:       "safeguard: node without a zone label ignores zone hints",
			zone:       missingZone,
			eps:        []Endpoint{ep("10.0.0.1", zones(thisZone)), ep("10.0.0.2", zones("zone-b"))},
			wantDests:  "10.0.0.1:8080 10.0.0.2:8080",
			wantReason: "iTP=Cluster; zone hints ignored: node has no topology.kubernetes.io/zone label; 2 ready endpoints",
		},
		{
			name:       "safeguard: node with an empty zone label ignores zone hints",
			zone:       emptyZone,
			eps:        []Endpoint{ep("10.0.0.1", zones(thisZone)), ep("10.0.0.2", zones("zone-b"))},
			wantDests:  "10.0.0.1:8080 10.0.0.2:8080",
			wantReason: "iTP=Cluster; zone hints ignored: node has no topology.kubernetes.io/zone label; 2 ready endpoints",
		},
		{
			name:       "safeguard: no hint for this zone ignores zone hints",
			eps:        []Endpoint{ep("10.0.0.1", zones("zone-b")), ep("10.0.0.2", zones("zone-c"))},
			wantDests:  "10.0.0.1:8080 10.0.0.2:8080",
			wantReason: "iTP=Cluster; zone hints ignored: none for zone zone-a; 2 ready endpoints",
		},
		{
			name: "safeguard: only unready endpoints hinted for this zone ignores zone hints",
			eps: []Endpoint{ep("10.0.0.1", zones(thisZone), notReady), ep("10.0.0.2", zones("zone-b")),
				ep("10.0.0.3", zones("zone-c"))},
			wantDests:  "10.0.0.2:8080 10.0.0.3:8080",
			wantReason: "iTP=Cluster; zone hints ignored: none for zone zone-a; 2 ready endpoints",
		},
		{
			name:       "multiple zones in one hint: the endpoint serves each of them",
			eps:        []Endpoint{ep("10.0.0.1", zones("zone-b", thisZone)), ep("10.0.0.2", zones("zone-b")), ep("10.0.0.3", zones("zone-c", "zone-b"))},
			wantDests:  "10.0.0.1:8080",
			wantReason: "iTP=Cluster; zone hints for zone-a; 1 of 3 ready endpoints",
		},
		{
			name: "node hints: only endpoints hinted for this node, over zone hints",
			eps: []Endpoint{ep("10.0.0.1", nodes(thisNode), zones(thisZone)), ep("10.0.0.2", nodes("node-b"), zones(thisZone)),
				ep("10.0.0.3", nodes("node-c"), zones("zone-b"))},
			wantDests:  "10.0.0.1:8080",
			wantReason: "iTP=Cluster; node hints for node-a; 1 of 3 ready endpoints",
		},
		{
			name: "safeguard: forNodes not naming this node falls back to zone hints",
			eps: []Endpoint{ep("10.0.0.1", nodes("node-b"), zones(thisZone)), ep("10.0.0.2", nodes("node-c"), zones("zone-b")),
				ep("10.0.0.3", nodes("node-b"), zones(thisZone))},
			wantDests:  "10.0.0.1:8080 10.0.0.3:8080",
			wantReason: "iTP=Cluster; node hints ignored: none for node node-a; zone hints for zone-a; 2 of 3 ready endpoints",
		},
		{
			name:       "safeguard: forNodes not naming this node and no zone hints means no filtering",
			eps:        []Endpoint{ep("10.0.0.1", nodes("node-b")), ep("10.0.0.2", nodes("node-c"))},
			wantDests:  "10.0.0.1:8080 10.0.0.2:8080",
			wantReason: "iTP=Cluster; node hints ignored: none for node node-a; 2 ready endpoints",
		},
		{
			name:       "safeguard: one ready endpoint without forNodes disables node hints",
			eps:        []Endpoint{ep("10.0.0.1", nodes(thisNode), zones(thisZone)), ep("10.0.0.2", zones(thisZone)), ep("10.0.0.3", zones("zone-b"))},
			wantDests:  "10.0.0.1:8080 10.0.0.2:8080",
			wantReason: "iTP=Cluster; node hints ignored: ready endpoint 10.0.0.2:8080 has no forNodes; zone hints for zone-a; 2 of 3 ready endpoints",
		},
		{
			name:       "terminating fallback: no ready endpoint uses every serving-terminating one, ignoring hints",
			eps:        []Endpoint{ep("10.0.0.1", zones("zone-b"), terminating), ep("10.0.0.2", terminating), ep("10.0.0.3", terminatingDead), ep("10.0.0.4", notReady)},
			wantDests:  "10.0.0.1:8080 10.0.0.2:8080",
			wantReason: "iTP=Cluster; no ready endpoints; 2 serving-terminating endpoints",
		},
		{
			name:       "terminating fallback: ready endpoints anywhere win over terminating ones",
			eps:        []Endpoint{ep("10.0.0.1", terminating), ep("10.0.0.2")},
			wantDests:  "10.0.0.2:8080",
			wantReason: "iTP=Cluster; no topology hints; 1 ready endpoint",
		},
		{
			name:       "no usable endpoints: the virtual server exists without destinations",
			eps:        []Endpoint{ep("10.0.0.1", notReady), ep("10.0.0.2", terminatingDead)},
			wantDests:  "",
			wantReason: "iTP=Cluster; no usable endpoints",
		},
		{
			name:       "iTP=Local: local ready endpoints only, ignoring hints",
			svc:        []svcOpt{internalLocal},
			eps:        []Endpoint{ep("10.0.0.1", local(), zones("zone-b")), ep("10.0.0.2", zones(thisZone)), ep("10.0.0.3", local(), notReady)},
			wantDests:  "10.0.0.1:8080",
			wantReason: "iTP=Local; 1 of 2 ready endpoints local",
		},
		{
			name:       "iTP=Local fallback: no local ready uses local serving-terminating",
			svc:        []svcOpt{internalLocal},
			eps:        []Endpoint{ep("10.0.0.1", local(), terminating), ep("10.0.0.2"), ep("10.0.0.3", terminating)},
			wantDests:  "10.0.0.1:8080",
			wantReason: "iTP=Local; no local ready endpoints; 1 local serving-terminating endpoint",
		},
		{
			name:       "iTP=Local: no local endpoints means no destinations, never remote ones",
			svc:        []svcOpt{internalLocal},
			eps:        []Endpoint{ep("10.0.0.2"), ep("10.0.0.3", local(), terminatingDead)},
			wantDests:  "",
			wantReason: "iTP=Local; no local endpoints",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			self := node(thisNode, thisZone, "192.168.0.1")
			switch tc.zone {
			case missingZone:
				delete(self.Labels, LabelTopologyZone)
			case emptyZone:
				self.Labels[LabelTopologyZone] = ""
			}
			e, _ := newEngine(t, world{
				nodes:  []*Node{self},
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

// TestExternalTrafficPolicy: external virtual servers follow eTP, the
// ClusterIP follows iTP, independently.
func TestExternalTrafficPolicy(t *testing.T) {
	tests := []struct {
		name                      string
		externalLocal             bool
		wantCluster, wantNodePort string
		wantPolicy                TrafficPolicy
		wantReason                string
	}{
		{
			name: "eTP=Cluster: external traffic uses cluster selection with hints", wantPolicy: PolicyCluster,
			wantCluster: "10.0.0.1:8080", wantNodePort: "10.0.0.1:8080",
			wantReason: "eTP=Cluster; zone hints for zone-a; 1 of 2 ready endpoints",
		},
		{
			name: "eTP=Local: external traffic uses local endpoints only; ClusterIP unaffected", externalLocal: true,
			wantPolicy: PolicyLocal, wantCluster: "10.0.0.1:8080", wantNodePort: "10.0.0.2:8080",
			wantReason: "eTP=Local; 1 of 2 ready endpoints local; in-cluster clients via 10.96.0.1:80",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := svc("web", func(s *Service) {
				s.Ports[0].NodePort = 30080
				s.ExternalLocal = tc.externalLocal
			})
			e, _ := newEngine(t, world{svcs: []*Service{s}, slices: []*EndpointSlice{slice("web", "web-1",
				ep("10.0.0.1", zones(thisZone)), ep("10.0.0.2", local(), zones("zone-b")))}})
			plan, _ := e.Compute()
			if got := dests(vsOf(t, plan, KindClusterIP).Destinations); got != tc.wantCluster {
				t.Errorf("ClusterIP destinations %q, want %q", got, tc.wantCluster)
			}
			np := vsOf(t, plan, KindNodePort)
			if got := dests(np.Destinations); got != tc.wantNodePort {
				t.Errorf("NodePort destinations %q, want %q", got, tc.wantNodePort)
			}
			if np.TrafficPolicy != tc.wantPolicy || np.Reason != tc.wantReason {
				t.Errorf("NodePort policy %s reason %q, want %s %q", np.TrafficPolicy, np.Reason, tc.wantPolicy, tc.wantReason)
			}
		})
	}
}
