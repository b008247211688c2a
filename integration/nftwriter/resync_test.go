//go:build integration

package nftwriter

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"golang.org/x/sys/unix"
)

// handEdit sends one batch behind the writer's back.
func handEdit(t *testing.T, c *nftables.Conn, what string, queue func() error) {
	t.Helper()
	if err := queue(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if err := c.Flush(); err != nil {
		t.Fatalf("%s: flush: %v", what, err)
	}
}

// set is a handle on one of our sets, as the writer declares it (a set
// read back from google/nftables v0.3.0 loses a verdict map's key type).
func set(name string, isMap bool, data nftables.SetDatatype) *nftables.Set {
	return &nftables.Set{Table: ourTable, Name: name, IsMap: isMap, DataType: data}
}

func vsKey4(a string, proto byte, port uint16) []byte {
	ip := netip.MustParseAddr(a).As4()
	return []byte{ip[0], ip[1], ip[2], ip[3], proto, 0, 0, 0, byte(port >> 8), byte(port), 0, 0}
}

// TestResyncRepairsDriftInPlace: a Resync of an unchanged table reads
// every kind of set and map back as the writer wrote it (no change, no
// rebuild); elements deleted, added or changed by hand in a set, a
// verdict map, a data map and a concatenated interval set are repaired
// by Repair with exactly those element changes, in place; a table
// deleted by hand, or a chain given an extra rule, is rebuilt.
func TestResyncRepairsDriftInPlace(t *testing.T) {
	w := newWriter(t)
	plan := fullPlan()
	if err := w.Resync(plan); err != nil {
		t.Fatalf("first Resync: %v", err)
	}
	if st := w.LastResync(); !st.Rebuilt {
		t.Errorf("first Resync: %+v, want a rebuild", st)
	}
	c := newConn(t)
	want := kernelDump(t, c)
	if err := w.Resync(plan); err != nil {
		t.Fatalf("second Resync: %v", err)
	}
	if st := w.LastResync(); st.Rebuilt || st.Added+st.Deleted != 0 || st.Read == 0 {
		t.Fatalf("Resync of an unchanged table: %+v, want no rebuild and no change", st)
	}
	t.Logf("unchanged table: %+v", w.LastResync())

	tcp, udp := byte(unix.IPPROTO_TCP), byte(unix.IPPROTO_UDP)
	lbKey := vsKey4("192.0.2.1", tcp, 443)
	handEdit(t, c, "drift", func() error {
		errs := []error{
			c.SetDeleteElements(set("service-ports-v4", false, nftables.SetDatatype{}), []nftables.SetElement{{Key: vsKey4("10.96.0.53", udp, 53)}}),
			c.SetAddElements(set("service-ips-v4", false, nftables.SetDatatype{}), []nftables.SetElement{{Key: []byte{10, 96, 9, 9}}}),
			c.SetDeleteElements(set("empty-services-v4", true, nftables.TypeVerdict), []nftables.SetElement{{Key: vsKey4("10.96.0.50", tcp, 80)}}),
			c.SetAddElements(set("empty-services-v4", true, nftables.TypeVerdict), []nftables.SetElement{{Key: vsKey4("10.96.0.50", tcp, 80),
				VerdictData: &expr.Verdict{Kind: expr.VerdictDrop}}}),
			c.SetDeleteElements(set("internal-via-v4", true, nftables.SetDatatype{}), []nftables.SetElement{{Key: vsKey4("192.168.1.10", tcp, 30080)}}),
			c.SetAddElements(set("internal-via-v4", true, nftables.SetDatatype{Bytes: 8}), []nftables.SetElement{{Key: vsKey4("192.168.1.10", tcp, 30080),
				Val: []byte{10, 96, 0, 61, 0, 80, 0, 0}}}),
			c.SetDeleteElements(set("lb-source-allowed-v4", false, nftables.SetDatatype{}), []nftables.SetElement{{
				Key: append(append([]byte{}, lbKey...), 203, 0, 113, 7), KeyEnd: append(append([]byte{}, lbKey...), 203, 0, 113, 7)}}),
		}
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	})
	if kernelDump(t, c) == want {
		t.Fatalf("the hand edits changed nothing")
	}
	if err := repairAll(w); err != nil {
		t.Fatalf("Repair: %v", err)
	}
	// Deleted by hand: 3 re-added, 1 added by hand deleted, 2 changed
	// (deleted and re-added).
	if st := w.LastResync(); st.Rebuilt || st.Added != 4 || st.Deleted != 3 {
		t.Errorf("Repair of 5 hand edits: %+v, want 4 adds and 3 deletes in place", st)
	}
	if got := kernelDump(t, c); got != want {
		t.Errorf("Repair did not restore the table (-want +got):\n%s", cmp.Diff(want, got))
	}

	handEdit(t, c, "add a rule", func() error {
		c.AddRule(&nftables.Rule{Table: ourTable, Chain: &nftables.Chain{Name: "raw-output", Table: ourTable},
			Exprs: []expr.Any{&expr.Counter{}}})
		return nil
	})
	if err := w.Resync(plan); err != nil {
		t.Fatalf("Resync after a rule was added: %v", err)
	}
	if st := w.LastResync(); !st.Rebuilt || !strings.Contains(st.Reason, "raw-output") {
		t.Errorf("Resync after a rule was added by hand: %+v, want a rebuild naming raw-output", st)
	}
	if got := kernelDump(t, c); got != want {
		t.Errorf("rebuild did not restore the table (-want +got):\n%s", cmp.Diff(want, got))
	}

	handEdit(t, c, "delete the table", func() error { c.DelTable(ourTable); return nil })
	if err := repairAll(w); err != nil {
		t.Fatalf("Repair after the table was deleted: %v", err)
	}
	if st := w.LastResync(); !st.Rebuilt || !strings.Contains(st.Reason, "missing") {
		t.Errorf("Repair of a deleted table: %+v, want a rebuild, table missing", st)
	}
	if got := kernelDump(t, c); got != want {
		t.Errorf("Repair did not re-create the table (-want +got):\n%s", cmp.Diff(want, got))
	}
}

// scalePlan is n ClusterIP services 10.100.x.y:80/TCP, masqueraded from
// off the cluster, with dests remote destinations each: the loop's plan at
// that scale (3 elements per service).
func scalePlan(n, dests int) policy.Plan {
	var vss []policy.VirtualServer
	for i := range n {
		hi, lo := byte(i>>8), byte(i)
		vs := policy.VirtualServer{Service: policy.ServiceKey{Namespace: "scale", Name: fmt.Sprintf("svc-%d", i)}, Kind: policy.KindClusterIP,
			Address: netip.AddrFrom4([4]byte{10, 100, hi, lo}), Port: 80, Protocol: policy.ProtocolTCP,
			Scheduler: "rr", Masquerade: policy.MasqueradeOffCluster}
		for j := range dests {
			vs.Destinations = append(vs.Destinations, dest(netip.AddrFrom4([4]byte{10, byte(200 + j), hi, lo}).String(), 8080))
		}
		vss = append(vss, vs)
	}
	policy.SortVirtualServers(vss)
	return policy.Plan{Node: "node-a", VirtualServers: vss}
}

// dumpTable reads what the drift check reads, with a plain connection:
// the table's sets and every set's elements, its chains and their rules.
func dumpTable(t *testing.T, c *nftables.Conn) (elements int) {
	t.Helper()
	sets, err := c.GetSets(ourTable)
	if err != nil {
		t.Fatalf("GetSets: %v", err)
	}
	for _, s := range sets {
		es, err := c.GetSetElements(s)
		if err != nil {
			t.Fatalf("GetSetElements %s: %v", s.Name, err)
		}
		elements += len(es)
	}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		t.Fatalf("ListChainsOfTableFamily: %v", err)
	}
	for _, ch := range chains {
		if ch.Table.Name == nft.TableName {
			if _, err := ruleReader(t).GetRules(ourTable, ch); err != nil {
				t.Fatalf("GetRules %s: %v", ch.Name, err)
			}
		}
	}
	return elements
}

// TestResyncNoChangeCost programs KIP_SCALE_SERVICES services (default
// 300) with 10 destinations each and compares, in the same boot, one
// plain dump of the table with the old path (a rebuild: the whole table
// replaced) and the new one (Resync and repair with nothing changed: a
// read and a diff, no batch). It logs the numbers (and CPU profiles with
// KIP_PPROF=1); the ratio check is generous.
func TestResyncNoChangeCost(t *testing.T) {
	n := labnet.ScaleServices(t, 300)
	w := newWriter(t)
	plan := scalePlan(n, 10)
	start := time.Now()
	if err := w.Resync(plan); err != nil {
		t.Fatalf("first Resync: %v", err)
	}
	t.Logf("first Resync of %d services: %v", n, time.Since(start).Round(time.Millisecond))
	c := newConn(t)
	var elems int
	rebuild := func() {
		if err := rebuildTable(plan); err != nil {
			t.Fatalf("Rebuild: %v", err)
		}
	}
	resync := func() {
		if err := w.Resync(plan); err != nil {
			t.Fatalf("Resync: %v", err)
		}
		if st := w.LastResync(); st.Rebuilt || st.Added+st.Deleted != 0 {
			t.Fatalf("Resync with nothing changed: %+v, want no rebuild and no change", st)
		}
	}
	repair := func() {
		if err := repairAll(w); err != nil {
			t.Fatalf("Repair: %v", err)
		}
		if st := w.LastResync(); st.Rebuilt || st.Added+st.Deleted != 0 {
			t.Fatalf("Repair with nothing changed: %+v, want no rebuild and no change", st)
		}
	}
	labnet.Profiled(t, "nft-resync", resync)
	labnet.Profiled(t, "nft-repair", repair)
	// Interleaved, best of 3 each, so that the host's load weighs on all
	// alike. The rebuild comes last in each round: the Resync after it
	// must find the rebuilt table unchanged.
	best := labnet.Interleaved(3, func() { elems = dumpTable(t, c) }, resync, repair, rebuild)
	dump, resyncBest, repairBest, rebuildBest := best[0], best[1], best[2], best[3]
	// The loop's periodic repair: in slices of 100 ms (best of 3 by total).
	slices, longest, total := labnet.BestSliced(3, func() (int, time.Duration, time.Duration) {
		return repairInSlices(t, w, 100*time.Millisecond)
	})
	t.Logf("RESULT nft n=%d elements=%d dump=%v rebuild(old)=%v resync=%v repair=%v resync/dump=%.2f repair/dump=%.2f; in slices of 100ms: %d slices, longest %v, total %v",
		n, elems, dump.Round(time.Millisecond), rebuildBest.Round(time.Millisecond), resyncBest.Round(time.Millisecond),
		repairBest.Round(time.Millisecond), float64(resyncBest)/float64(dump), float64(repairBest)/float64(dump),
		slices, longest.Round(time.Millisecond), total.Round(time.Millisecond))
	// The 2× target is checked only when measuring (KIP_SCALE_SERVICES
	// set, on a quiet host): at make test's small default scale, on a
	// shared CI machine, a ratio of two short times is noise.
	if os.Getenv("KIP_SCALE_SERVICES") != "" && repairBest > 2*dump+50*time.Millisecond {
		t.Errorf("Repair with nothing changed took %v, more than twice the dump (%v)", repairBest, dump)
	}
	// Drift is still repaired at this scale: one service's elements
	// deleted by hand come back, in place.
	handEdit(t, c, "delete svc-7's service port", func() error {
		return c.SetDeleteElements(set("service-ports-v4", false, nftables.SetDatatype{}),
			[]nftables.SetElement{{Key: vsKey4("10.100.0.7", unix.IPPROTO_TCP, 80)}})
	})
	if err := repairAll(w); err != nil {
		t.Fatalf("Repair: %v", err)
	}
	if st := w.LastResync(); st.Rebuilt || st.Added != 1 || st.Deleted != 0 {
		t.Errorf("Repair of one deleted element: %+v, want 1 add in place", st)
	}
}

// repairInSlices runs a Repair in slices of budget and returns the
// number of slices, the longest and the total time.
func repairInSlices(t *testing.T, w *nft.Writer, budget time.Duration) (int, time.Duration, time.Duration) {
	t.Helper()
	start := time.Now()
	if err := w.StartRepair(); err != nil {
		t.Fatalf("StartRepair: %v", err)
	}
	var longest time.Duration
	n := 0
	for done := false; !done; n++ {
		s := time.Now()
		var err error
		if done, err = w.RepairStep(budget, nil); err != nil {
			t.Fatalf("RepairStep: %v", err)
		}
		longest = max(longest, time.Since(s))
	}
	if st := w.LastResync(); st.Rebuilt || st.Added+st.Deleted != 0 {
		t.Errorf("Repair in slices with nothing changed: %+v, want no rebuild and no change", st)
	}
	return n, longest, time.Since(start)
}
