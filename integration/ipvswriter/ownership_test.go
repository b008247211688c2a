//go:build integration

package ipvswriter

import (
	"strings"
	"testing"

	mobyipvs "github.com/moby/ipvs"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// TestNodePortOwnershipByExactKey: a NodePort virtual server is ours by
// its exact address, port and protocol. A foreign virtual server on a
// node address and a port that is our NodePort only on another node
// address, or only in the other family, survives Apply, Resync and
// Cleanup.
func TestNodePortOwnershipByExactKey(t *testing.T) {
	h := clean(t)
	labnet.Dummy(t, "node0", "198.51.100.10/24", "198.51.100.11/24", "2001:db8::10/64")
	// Ours: 30080/TCP on 198.51.100.10 only; 31000/TCP on 198.51.100.11
	// and on [2001:db8::10].
	ours := []policy.ServicePlan{
		svc("a", vs("NodePort 198.51.100.10:30080/TCP", "10.244.1.2:8080")),
		svc("b", vs("NodePort 198.51.100.11:31000/TCP", "10.244.1.3:8080"),
			vs("NodePort [2001:db8::10]:31000/TCP", "[fd00:244:1::3]:8080")),
	}
	// Foreign: 30080/TCP on the other v4 node address and on the v6 one,
	// where we have a NodePort, but not this one.
	foreign := []*mobyipvs.Service{
		mobyService("198.51.100.11", 30080, unix.IPPROTO_TCP),
		mobyService("2001:db8::10", 30080, unix.IPPROTO_TCP),
	}
	for _, f := range foreign {
		if err := h.NewService(f); err != nil {
			t.Fatalf("foreign virtual server: %v", err)
		}
	}
	survives := func(when string) {
		t.Helper()
		got := dumpIPVS(t, h)
		for _, want := range []string{"TCP 198.51.100.11:30080 ", "TCP [2001:db8::10]:30080 "} {
			if !strings.Contains(got, want) {
				t.Errorf("after %s the foreign virtual server %s is gone:\n%s", when, strings.TrimSpace(want), got)
			}
		}
	}
	w := newWriter(t, ipvs.Config{})
	if err := w.Apply(ours); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	survives("Apply")
	if err := w.Resync(plan(ours...)); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	survives("Resync")
	if !strings.Contains(dumpIPVS(t, h), "TCP 198.51.100.10:30080 ") {
		t.Errorf("our NodePort 198.51.100.10:30080/TCP missing:\n%s", dumpIPVS(t, h))
	}
	if err := w.Cleanup(); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	survives("Cleanup")
	if got := dumpIPVS(t, h); strings.Count(got, "TCP ") != 2 {
		t.Errorf("after Cleanup IPVS holds:\n%s\nwant only the two foreign virtual servers", got)
	}
}
