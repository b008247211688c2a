//go:build integration

package traffic

import (
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// nodePorts gives a service's http and dns ports these node ports.
func nodePorts(tcp, udp uint16) func(*policy.Service) {
	return func(s *policy.Service) {
		s.Ports[0].NodePort, s.Ports[1].NodePort = tcp, udp
	}
}

func externalLocal(s *policy.Service) { s.ExternalLocal = true }

// TestNodePortFromExternalClient sends the external client's traffic to
// node-a's NodePorts (192.168.100.1 and fd00:100::1).
func TestNodePortFromExternalClient(t *testing.T) {
	l := newLab(t)
	cluster := service("etp-cluster", []string{"10.96.5.1", "fd00:96::5:1"}, nodePorts(30081, 30051))
	l.setService(cluster, l.ep("pod-b1"), l.ep("pod-b2"), l.ep("pod-c1"), l.ep6("pod-b1"), l.ep6("pod-b2"), l.ep6("pod-c1"))
	local := service("etp-local", []string{"10.96.5.2"}, nodePorts(30082, 30052), externalLocal)
	l.setService(local, l.ep("pod-a1"), l.ep("pod-b1"))
	remoteOnly := service("etp-local-remote-only", []string{"10.96.5.3"}, nodePorts(30083, 30053), externalLocal)
	l.setService(remoteOnly, l.ep("pod-b1"), l.ep("pod-c1"))
	l.resync()
	node4, node6, client := l.root.v4, l.root.v6, l.client

	t.Run("eTP=Cluster reaches remote endpoints and the backend sees the node IP", func(t *testing.T) {
		remote := []string{"pod-b1", "pod-b2", "pod-c1"}
		for _, tc := range []struct {
			proto Proto
			addr  string
			node  string
		}{
			{TCP, hostPort(node4, 30081), node4.String()},
			{UDP, hostPort(node4, 30051), node4.String()},
			{TCP, hostPort(node6, 30081), node6.String()},
			{UDP, hostPort(node6, 30051), node6.String()},
		} {
			l.expectOnly(t, client, tc.addr, tc.proto, nConns, remote...)
			checkPeersProto(t, l.harness, client, tc.proto, tc.addr, tc.node)
		}
	})
	t.Run("eTP=Local reaches only local endpoints and the backend sees the client IP", func(t *testing.T) {
		for _, tc := range []struct {
			proto Proto
			addr  string
		}{{TCP, hostPort(node4, 30082)}, {UDP, hostPort(node4, 30052)}} {
			l.expectOnly(t, client, tc.addr, tc.proto, nConns, "pod-a1")
			checkPeersProto(t, l.harness, client, tc.proto, tc.addr, client.v4.String())
		}
	})
	dropVS := l.virtualServer(remoteOnly.Key, policy.KindNodePort, policy.ProtocolTCP, true)
	t.Run("eTP=Local without local endpoints drops while remote ones exist", func(t *testing.T) {
		if dropVS.WhenEmpty != policy.EmptyDrop {
			t.Fatalf("plan: whenEmpty %q, want Drop (reason %q)", dropVS.WhenEmpty, dropVS.Reason)
		}
		l.expectDrop(t, client, TCP, hostPort(node4, 30083))
		l.expectDrop(t, client, UDP, hostPort(node4, 30053))
	})
}

// checkPeersProto is checkPeers for either protocol.
func checkPeersProto(t *testing.T, h *harness, from *host, proto Proto, addr, want string) {
	t.Helper()
	peers, err := h.Peers(from, addr, proto, nConns)
	if err != nil {
		t.Fatal(err)
	}
	if len(peers) == 0 {
		t.Fatalf("no answers")
	}
	for name, ip := range peers {
		if ip != want {
			t.Errorf("%s %s from %s: %s saw peer %s, want %s", proto, addr, from, name, ip, want)
		}
	}
}
