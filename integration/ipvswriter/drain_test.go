//go:build integration

package ipvswriter

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	mobyipvs "github.com/moby/ipvs"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// (f) A TCP destination removed while it has an established connection
// keeps weight 0 while the connection lives (new connections go to the
// other pod, the old one still works) and is deleted once it closes.
func TestGracefulDrainTCP(t *testing.T) {
	h := clean(t)
	a, b := setupPod(t, "pod-a", 1), setupPod(t, "pod-b", 2)
	w := newWriter(t, ipvs.Config{})
	pa, pb := fmt.Sprintf("%s:8080", a.IP), fmt.Sprintf("%s:8080", b.IP)
	if err := w.Apply(cluster1("ClusterIP 10.96.0.10:80/TCP", pa)); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	conn, r, name := dialGreet(t, "10.96.0.10:80")
	defer conn.Close()
	if name != "pod-a" {
		t.Fatalf("first connection answered by %s, want pod-a", name)
	}

	start := time.Now()
	if err := w.Apply(cluster1("ClusterIP 10.96.0.10:80/TCP", pb)); err != nil {
		t.Fatalf("Apply (pod-a removed): %v", err)
	}
	svc := mobyService("10.96.0.10", 80, unix.IPPROTO_TCP)
	check := func(when string) {
		t.Helper()
		ds := destinations(t, h, svc)
		da := ds[pa]
		if da == nil {
			t.Fatalf("%s: pod-a deleted while its connection lives", when)
		}
		if da.Weight != 0 || da.ActiveConnections != 1 {
			t.Errorf("%s: pod-a weight %d active %d inactive %d, want weight 0, 1 active", when, da.Weight, da.ActiveConnections, da.InactiveConnections)
		}
		if db := ds[pb]; db == nil || db.Weight != 1 {
			t.Errorf("%s: pod-b %+v, want weight 1", when, db)
		}
		if w.Draining() != 1 {
			t.Errorf("%s: Draining() = %d, want 1", when, w.Draining())
		}
	}
	check("after removal")
	// New connections go to pod-b; the old one still works.
	c2, _, name2 := dialGreet(t, "10.96.0.10:80")
	c2.Close()
	if name2 != "pod-b" {
		t.Errorf("new connection answered by %s, want pod-b", name2)
	}
	// A connection closed with FIN stays in IPVS's table as inactive
	// (TIME_WAIT), so it would hold a draining destination a while longer.
	var db *mobyipvs.Destination
	for i := 0; i < 20; i++ {
		if db = destinations(t, h, svc)[pb]; db != nil && db.ActiveConnections == 0 && db.InactiveConnections == 1 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("pod-b after a FIN close: %d active, %d inactive connections", db.ActiveConnections, db.InactiveConnections)
	if db.ActiveConnections != 0 || db.InactiveConnections != 1 {
		t.Errorf("pod-b after a FIN close: %d active %d inactive, want 0 and 1", db.ActiveConnections, db.InactiveConnections)
	}
	if _, err := conn.Write([]byte("still there\n")); err != nil {
		t.Fatalf("write on the draining connection: %v", err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "pod-a still there\n" {
		t.Fatalf("echo on the draining connection: %q, %v", line, err)
	}
	for range 3 {
		time.Sleep(300 * time.Millisecond)
		if err := w.Apply(nil); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		check("a later Apply")
	}
	// Close with a reset, so that IPVS forgets the connection soon (its
	// CLOSE state lasts 10 s) rather than after TIME_WAIT.
	if err := conn.SetLinger(0); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	closed := time.Now()
	deadline := closed.Add(60 * time.Second)
	for {
		if err := w.Apply(nil); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		if destinations(t, h, svc)[pa] == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod-a not deleted 60 s after its connection closed: %+v", destinations(t, h, svc)[pa])
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("pod-a deleted %.1f s after its connection was reset (%.1f s after removal from the plan)",
		time.Since(closed).Seconds(), time.Since(start).Seconds())
	if w.Draining() != 0 {
		t.Errorf("Draining() = %d after deletion", w.Draining())
	}
	if db := destinations(t, h, svc)[pb]; db == nil || db.Weight != 1 {
		t.Errorf("pod-b %+v, want weight 1", db)
	}
}

// (g) A UDP destination is deleted at once, and the Writer deletes no
// conntrack entry (the conntrack reconciler does, after the sync, for
// endpoints that no longer serve: package proxier/udpflows, tested in
// integration/traffic). The kernel expires the removed destination's
// connections, and with them their conntrack entries, itself
// (expire_nodest_conn, which the Writer sets); the other endpoint's
// entries stay.
func TestUDPRemoval(t *testing.T) {
	h := clean(t)
	enableConntrack(t)
	a, b := setupPod(t, "pod-a", 1), setupPod(t, "pod-b", 2)
	w := newWriter(t, ipvs.Config{})
	pa, pb := fmt.Sprintf("%s:5353", a.IP), fmt.Sprintf("%s:5353", b.IP)
	if err := w.Apply(cluster1("ClusterIP 10.96.0.53:53/UDP", pa, pb)); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	seen := map[string]int{}
	for range 4 {
		name := udpAsk(t, "10.96.0.53:53")
		seen[name]++
	}
	if seen["pod-a"] == 0 || seen["pod-b"] == 0 {
		t.Fatalf("flows answered %v, want both pods", seen)
	}
	before := labnet.CountUDPFlows(t, labnet.UDPFlow.AnsweredBy)
	t.Logf("conntrack UDP entries by reply source before: %v", before)
	if before[pb] == 0 || before[pa] == 0 {
		t.Fatalf("no conntrack entries replying from both pods: %v", before)
	}

	ops := w.Ops()
	if err := w.Apply(cluster1("ClusterIP 10.96.0.53:53/UDP", pa)); err != nil {
		t.Fatalf("Apply (pod-b removed): %v", err)
	}
	after := w.Ops()
	if d := after["delete-destination"] - ops["delete-destination"]; d != 1 {
		t.Errorf("delete-destination ops: %d, want 1", d)
	}
	svc := mobyService("10.96.0.53", 53, unix.IPPROTO_UDP)
	ds := destinations(t, h, svc)
	if ds[pb] != nil || ds[pa] == nil || len(ds) != 1 {
		t.Errorf("destinations after removal: %v, want only %s", keys(ds), pa)
	}
	if w.Draining() != 0 {
		t.Errorf("Draining() = %d, want 0 (UDP is never drained)", w.Draining())
	}
	removed := time.Now()
	got := labnet.CountUDPFlows(t, labnet.UDPFlow.AnsweredBy)
	for got[pb] != 0 && time.Since(removed) < 10*time.Second {
		time.Sleep(100 * time.Millisecond)
		got = labnet.CountUDPFlows(t, labnet.UDPFlow.AnsweredBy)
	}
	t.Logf("conntrack UDP entries by reply source %.1f s after the removal: %v", time.Since(removed).Seconds(), got)
	if got[pb] != 0 {
		t.Errorf("%d conntrack entries still reply from removed %s 10 s on: the kernel did not expire them", got[pb], pb)
	}
	if got[pa] != before[pa] {
		t.Errorf("entries of the kept endpoint: %d, were %d", got[pa], before[pa])
	}
	// New flows all go to pod-a.
	for range 2 {
		if name := udpAsk(t, "10.96.0.53:53"); name != "pod-a" {
			t.Errorf("flow answered by %s after pod-b's removal", name)
		}
	}
}

// enableConntrack makes the root netns track connections, as a node's
// nftables rules do: netfilter registers its conntrack hooks only when
// something needs them (IPVS itself does so only for FTP), so without a
// rule IPVS's flows get no conntrack entries at all. It loads a table
// with one "ct state" rule and deletes it when the test ends.
func enableConntrack(t *testing.T) {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatalf("nftables.New: %v", err)
	}
	accept := nftables.ChainPolicyAccept
	tbl := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "kip-test-ct"})
	for _, hook := range []*nftables.ChainHook{nftables.ChainHookPrerouting, nftables.ChainHookOutput} {
		ch := c.AddChain(&nftables.Chain{Name: fmt.Sprintf("ct-%d", *hook), Table: tbl, Type: nftables.ChainTypeFilter,
			Hooknum: hook, Priority: nftables.ChainPriorityFilter, Policy: &accept})
		c.AddRule(&nftables.Rule{Table: tbl, Chain: ch, Exprs: []expr.Any{
			&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
			&expr.Counter{},
		}})
	}
	if err := c.Flush(); err != nil {
		t.Fatalf("nftables: %v", err)
	}
	t.Cleanup(func() {
		c.DelTable(tbl)
		_ = c.Flush()
	})
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sortStrings(out)
	return out
}
