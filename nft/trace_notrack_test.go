package nft_test

import (
	"fmt"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft/internal/packettrace"
)

// TestNoTrackIsBothDirectionsOrNeither proves nft/README.md's invariant
// of the raw chains: "a connection is untracked in both directions or in
// neither" (tracked one way only, it breaks under IPVS). Every client of
// the NOTRACK service dns — pods on this node and on others, pods that
// are its destinations, a host outside the cluster, the node from its
// node IP and from its pod-network address — reaches each destination,
// through the VIP and directly; the destination's reply (from a host
// process for the host-network destination) must be untracked exactly
// when the request was. It holds in every local mode: by address, and
// by interface, where the replies are matched by the interface they
// leave by.
func TestNoTrackIsBothDirectionsOrNeither(t *testing.T) {
	for _, m := range localModes {
		t.Run(m.name, func(t *testing.T) { noTrackBothWays(t, newTracerFor(t, m)) })
	}
}

func noTrackBothWays(t *testing.T, tr *packettrace.Tracer) {
	clients := []struct {
		name string
		host bool
	}{{"pod-b", false}, {"pod-a", false}, {"pod-d", false}, {"other-node", false}, {"node", true}, {"bridge", true}}
	backends := []string{"node", "pod-a", "pod-c"}
	untracked := 0
	for fam := range 2 {
		for _, c := range clients {
			for _, b := range backends {
				for _, viaVIP := range []bool{true, false} {
					if !viaVIP && (b == c.name || c.host && b == "node") {
						continue // no connection to itself
					}
					req := traceCase{host: c.host, src: c.name, dst: b + ":5353", proto: packettrace.UDP}
					if viaVIP {
						req.dst, req.backend = "dns:53", b
					}
					reply := traceCase{host: b == "node", src: b + ":5353", dst: c.name + ":40000", proto: packettrace.UDP, state: packettrace.StateEstablished}
					name := fmt.Sprintf("%s/%s->%s:5353 via VIP %t", famName(fam), c.name, b, viaVIP)
					t.Run(name, func(t *testing.T) {
						fwd, err := tr.Trace(req.packet(t, fam))
						if err != nil {
							t.Fatal(err)
						}
						back, err := tr.Trace(reply.packet(t, fam))
						if err != nil {
							t.Fatal(err)
						}
						if fwd.NoTrack && back.NoTrack {
							untracked++
						}
						if fwd.NoTrack != back.NoTrack {
							t.Errorf("request notrack %t (%s), reply notrack %t (%s)",
								fwd.NoTrack, fwd.Summary(nameOf), back.NoTrack, back.Summary(nameOf))
						}
					})
				}
			}
		}
	}
	// The untracked ones are pod-b's and pod-d's (pods that are no
	// destination themselves), through the VIP and directly.
	if untracked == 0 {
		t.Error("no connection was untracked: the invariant was not exercised")
	}
	t.Logf("%d connections untracked both ways", untracked)
}
