//go:build integration

package traffic

import (
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// tcpNoTrackLab is a NOTRACK service with a local and a remote endpoint.
func tcpNoTrackLab(t *testing.T) *lab {
	l := newLab(t)
	l.setService(service("tcp-notrack", []string{"10.96.8.1"}, annotate(policy.AnnotationNoTrack, "true")),
		l.ep("pod-a1"), l.ep("pod-b1"))
	l.resync()
	return l
}

// expectAllAnswered makes n connections from `from` and fails on any
// that is not answered.
func expectAllAnswered(t *testing.T, from *host, addr string, n int) {
	t.Helper()
	failed := 0
	for i := 0; i < n; i++ {
		if err := dialAnswered(from, addr); err != nil {
			failed++
			t.Logf("connection %d from %s: %v", i, from.Name, err)
		}
	}
	if failed > 0 {
		t.Errorf("from %s: %d of %d connections to %s failed", from.Name, failed, n, addr)
	}
}

// TestNoTrackTCPServiceAnswersPods: a NOTRACK service answers every
// connection from a pod (its untracked clients), to a local and a remote
// endpoint.
func TestNoTrackTCPServiceAnswersPods(t *testing.T) {
	l := tcpNoTrackLab(t)
	expectAllAnswered(t, l.pod("pod-a3"), "10.96.8.1:80", 20)
}

// TestNoTrackTCPServiceAnswersTheNode: the node's own connections to a
// NOTRACK service are answered by every endpoint. They stay tracked and
// are masqueraded; to the local pod, masquerade picks the pod gateway
// address 10.244.1.1 as the source, which is in the cluster CIDRs, and
// the pod's reply to it must still reach conntrack to be de-NATed (the
// reply rule skips destinations local to the node). This failed for the
// local endpoint until that exception existed.
func TestNoTrackTCPServiceAnswersTheNode(t *testing.T) {
	l := tcpNoTrackLab(t)
	expectAllAnswered(t, l.root, "10.96.8.1:80", 20)
}

// TestNoTrackReachesEndpointsUntracked: a pod on another node (and not a
// NOTRACK destination itself) reaching a
// NOTRACK service's endpoint on this node (what the far end of another
// node's IPVS sends) is untracked here in both directions, not tracked
// one way only; the same traffic to an endpoint of a tracked service is
// tracked.
func TestNoTrackReachesEndpointsUntracked(t *testing.T) {
	l := tcpNoTrackLab(t) // pod-a1 is a NOTRACK destination
	l.setService(service("tcp-tracked", []string{"10.96.8.2"}), l.ep("pod-a2"))
	l.resync()
	client := l.pod("pod-b2")
	untracked, tracked := l.pod("pod-a1").v4, l.pod("pod-a2").v4
	for _, a := range []netip.Addr{untracked, tracked} {
		expectAllAnswered(t, client, hostPort(a, podTCPPort), 5)
	}
	flows, err := netlink.ConntrackTableList(netlink.ConntrackTable, unix.AF_INET)
	if err != nil {
		t.Fatalf("list conntrack: %v", err)
	}
	// Only this client's flows count: earlier tests in the same boot
	// may have left flows of their own to the same pods.
	n := map[netip.Addr]int{}
	from := client.v4
	for _, f := range flows {
		for _, a := range []netip.Addr{untracked, tracked} {
			src, dst := addrOf(f.Forward.SrcIP), addrOf(f.Forward.DstIP)
			if f.Forward.Protocol == unix.IPPROTO_TCP && (src == from && dst == a || src == a && dst == from) {
				n[a]++
				if a == untracked {
					t.Logf("  tracked: %s", f)
				}
			}
		}
	}
	t.Logf("conntrack: %d flows to the NOTRACK endpoint %s, %d to the tracked one %s", n[untracked], untracked, n[tracked], tracked)
	if n[untracked] != 0 {
		t.Errorf("%d conntrack entries for pod-b2 → NOTRACK endpoint %s:%d, want 0", n[untracked], untracked, podTCPPort)
	}
	if n[tracked] == 0 {
		t.Errorf("no conntrack entry for pod-b2 → %s:%d: the comparison proves nothing", tracked, podTCPPort)
	}
}

// TestNoTrackServiceAnswersItsOwnPods: a pod that is a destination of a
// NOTRACK service reaches the service and is answered by every
// destination, itself included: a NOTRACK destination's own connections
// stay tracked both ways (notrack-endpoint-addrs), so the hairpin back to
// itself is masqueraded. Untracked, it timed out; tracked one way only
// (forward tracked, the other destinations' replies not), conntrack
// re-tracked the client's next packets after IPVS and remapped their
// source port, and those timed out too.
func TestNoTrackServiceAnswersItsOwnPods(t *testing.T) {
	l := newLab(t)
	l.setService(service("tcp-notrack-self", []string{"10.96.8.3"}, annotate(policy.AnnotationNoTrack, "true")),
		l.ep("pod-a1"), l.ep("pod-a2"), l.ep("pod-b1"))
	l.resync()
	l.expectOnly(t, l.pod("pod-a1"), "10.96.8.3:80", TCP, nConns, "pod-a1", "pod-a2", "pod-b1")
}

// TestNoTrackSharedWithATrackedServiceIsRefused: a NOTRACK Service whose
// endpoints are also a tracked Service's (in another namespace) is served
// tracked, with a NoTrackRefused warning: pods' connections through both
// Services are answered, by a local and a remote endpoint. With NOTRACK
// applied, the tracked Service's replies were untracked and none of its
// connections was answered.
func TestNoTrackSharedWithATrackedServiceIsRefused(t *testing.T) {
	l := newLab(t)
	notrack := service("dns", []string{"10.96.8.5"}, annotate(policy.AnnotationNoTrack, "true"))
	tracked := service("web", []string{"10.96.8.6"}, func(s *policy.Service) { s.Key.Namespace = "team-b" })
	l.upsertWarned(notrack, l.ep("pod-a1"), l.ep("pod-b1"))
	l.upsertWarned(tracked, l.ep("pod-a1"), l.ep("pod-b1"))
	ws := l.resyncWarned()
	if len(ws) != 1 || ws[0].Reason != policy.ReasonNoTrackRefused || ws[0].Service != notrack.Key {
		t.Errorf("warnings %v, want one NoTrackRefused on default/dns", ws)
	}
	for _, w := range ws {
		t.Logf("warning: %s", w)
	}
	for _, addr := range []string{"10.96.8.6:80", "10.96.8.5:80"} {
		expectAllAnswered(t, l.pod("pod-a3"), addr, 10)
	}
}
