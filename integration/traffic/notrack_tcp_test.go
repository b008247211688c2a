//go:build integration

package traffic

import (
	"testing"

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

// TestNoTrackTCPServiceAnswersTheNode is a known failure, kept as the
// reproduction: from the node itself, the connections rr sends to the
// remote endpoint time out (the local ones are answered). The node's
// traffic is tracked and masqueraded (conntrack shows the reply tuple
// src=<remote pod> dst=<node IP>), yet the handshake never completes.
// The same service without NOTRACK works from the node
// (TestClusterIPMasqueradesOffClusterSourcesOnly).
func TestNoTrackTCPServiceAnswersTheNode(t *testing.T) {
	{
		t.Skip("known failure: the node's connections to a NOTRACK service's remote endpoint time out; see the doc comment")
	}
	l := tcpNoTrackLab(t)
	expectAllAnswered(t, l.root, "10.96.8.1:80", 20)
}
