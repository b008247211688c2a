//go:build integration

package traffic

import (
	"net"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// TestClusterIPServesOnlyAllowedEndpoints programs one service per
// selection rule with a full sync and checks, over nConns fresh TCP
// connections and nConns fresh UDP flows from pod-a3, that every endpoint
// the rule allows answers and no other does.
func TestClusterIPServesOnlyAllowedEndpoints(t *testing.T) {
	l := newLab(t)
	tests := []struct {
		name    string
		vip     string
		mods    []func(*policy.Service)
		eps     []policy.Endpoint
		allowed []string
	}{
		{name: "Cluster with zone hints uses the endpoints hinted for this node's zone", vip: "10.96.1.1",
			eps: []policy.Endpoint{l.ep("pod-a1", forZones(zoneA)), l.ep("pod-b1", forZones(zoneA)),
				l.ep("pod-b2", forZones(zoneB)), l.ep("pod-c1", forZones(zoneB))},
			allowed: []string{"pod-a1", "pod-b1"}},
		{name: "Cluster with node hints uses the endpoints hinted for this node", vip: "10.96.1.2",
			eps: []policy.Endpoint{l.ep("pod-a1", forNodes(nodeA)), l.ep("pod-b1", forNodes(nodeA, "node-b")),
				l.ep("pod-b2", forNodes("node-b")), l.ep("pod-c1", forNodes("node-c"))},
			allowed: []string{"pod-a1", "pod-b1"}},
		{name: "Cluster without hints uses every ready endpoint", vip: "10.96.1.3",
			eps:     []policy.Endpoint{l.ep("pod-a1"), l.ep("pod-b1"), l.ep("pod-c1"), l.ep("pod-b2", notReady)},
			allowed: []string{"pod-a1", "pod-b1", "pod-c1"}},
		{name: "iTP=Local uses only this node's endpoints", vip: "10.96.1.4",
			mods:    []func(*policy.Service){func(s *policy.Service) { s.InternalLocal = true }},
			eps:     []policy.Endpoint{l.ep("pod-a1"), l.ep("pod-a2"), l.ep("pod-b1"), l.ep("pod-c1")},
			allowed: []string{"pod-a1", "pod-a2"}},
		{name: "topology keys use the first tier with a ready endpoint", vip: "10.96.1.5",
			mods:    []func(*policy.Service){annotate(policy.AnnotationTopologyKeys, labelHostname+","+policy.LabelTopologyZone)},
			eps:     []policy.Endpoint{l.ep("pod-b1"), l.ep("pod-b2"), l.ep("pod-c1")},
			allowed: []string{"pod-b1", "pod-b2"}},
	}
	for _, tc := range tests {
		l.setService(service("svc-"+tc.vip, []string{tc.vip}, tc.mods...), tc.eps...)
	}
	l.resync()
	client := l.pod("pod-a3")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l.expectOnly(t, client, net.JoinHostPort(tc.vip, "80"), TCP, nConns, tc.allowed...)
			l.expectOnly(t, client, net.JoinHostPort(tc.vip, "53"), UDP, nConns, tc.allowed...)
		})
	}
}

// TestPreferLocalFallsBackAsLocalEndpointsDisappear walks PreferLocal's
// tiers with incremental Applies: this node's endpoints, then the rest of
// its zone (node-b), then the rest (node-c), and back when a local
// endpoint returns.
func TestPreferLocalFallsBackAsLocalEndpointsDisappear(t *testing.T) {
	l := newLab(t)
	const vip = "10.96.2.1"
	s := service("prefer-local", []string{vip}, annotate(policy.AnnotationTrafficPolicy, string(policy.PolicyPreferLocal)))
	l.setService(s, l.ep("pod-a1"), l.ep("pod-a2"), l.ep("pod-b1"), l.ep("pod-b2"), l.ep("pod-c1"))
	l.resync()
	client := l.pod("pod-a3")
	steps := []struct {
		name    string
		eps     []policy.Endpoint
		allowed []string
	}{
		{"this node's endpoints first", nil, []string{"pod-a1", "pod-a2"}},
		{"without local endpoints, the rest of the zone", []policy.Endpoint{l.ep("pod-b1"), l.ep("pod-b2"), l.ep("pod-c1")},
			[]string{"pod-b1", "pod-b2"}},
		{"without zone endpoints, any endpoint", []policy.Endpoint{l.ep("pod-c1")}, []string{"pod-c1"}},
		{"a local endpoint that returns wins again", []policy.Endpoint{l.ep("pod-a2"), l.ep("pod-c1")}, []string{"pod-a2"}},
	}
	for _, st := range steps {
		if st.eps != nil {
			l.setEndpoints(s.Key, st.eps...)
			l.apply(s.Key)
		}
		t.Run(st.name, func(t *testing.T) {
			l.expectOnly(t, client, net.JoinHostPort(vip, "80"), TCP, nConns, st.allowed...)
			l.expectOnly(t, client, net.JoinHostPort(vip, "53"), UDP, nConns, st.allowed...)
		})
	}
}

// TestTopologyKeysWithoutWildcardRejectWhenNoTierMatches: with topology
// keys hostname,zone and no "*", endpoints only in another zone match no
// tier, so the virtual server is empty and rejects: clients fail fast.
func TestTopologyKeysWithoutWildcardRejectWhenNoTierMatches(t *testing.T) {
	l := newLab(t)
	const vip = "10.96.3.1"
	s := service("keys", []string{vip}, annotate(policy.AnnotationTopologyKeys, labelHostname+","+policy.LabelTopologyZone))
	l.setService(s, l.ep("pod-c1"))
	l.resync()
	if vs := l.virtualServer(s.Key, policy.KindClusterIP, policy.ProtocolTCP, true); vs.WhenEmpty != policy.EmptyReject {
		t.Fatalf("plan: whenEmpty %q, want Reject (reason %q)", vs.WhenEmpty, vs.Reason)
	}
	client := l.pod("pod-a3")
	t.Run("no tier matches: refused", func(t *testing.T) {
		l.expectFastFailure(t, client, TCP, net.JoinHostPort(vip, "80"))
		l.expectFastFailure(t, client, UDP, net.JoinHostPort(vip, "53"))
	})

	l.setEndpoints(s.Key, l.ep("pod-b1"), l.ep("pod-c1"))
	l.apply(s.Key)
	t.Run("an endpoint in this zone matches the zone tier and is served", func(t *testing.T) {
		l.expectOnly(t, client, net.JoinHostPort(vip, "80"), TCP, nConns, "pod-b1")
	})
}

// TestClusterIPMasqueradesOffClusterSourcesOnly: a ClusterIP's backends
// see a pod client's own address, but traffic from outside the cluster
// CIDRs (node-a itself, whose source is the VIP, and the external client
// routing the service range to node-a) is masqueraded, so that remote
// backends answer through node-a.
func TestClusterIPMasqueradesOffClusterSourcesOnly(t *testing.T) {
	l := newLab(t)
	const vip = "10.96.4.1"
	l.setService(service("offcluster", []string{vip}), l.ep("pod-b1"), l.ep("pod-c1"))
	l.resync()
	addr, pod := net.JoinHostPort(vip, "80"), l.pod("pod-a3")
	t.Run("from a pod the backend sees the pod", func(t *testing.T) {
		checkPeersProto(t, l.harness, pod, TCP, addr, pod.v4.String())
	})
	t.Run("from node-a the remote backend sees node-a", func(t *testing.T) {
		checkPeersProto(t, l.harness, l.root, TCP, addr, l.root.v4.String())
	})
	t.Run("from the external client the remote backend sees node-a", func(t *testing.T) {
		checkPeersProto(t, l.harness, l.client, TCP, addr, l.root.v4.String())
	})
}
