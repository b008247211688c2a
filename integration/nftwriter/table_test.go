//go:build integration

package nftwriter

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/nftdump"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"golang.org/x/sys/unix"
)

var ourTable = &nftables.Table{Family: nftables.TableFamilyINet, Name: nft.TableName}

// newWriter returns a writer on the kernel whose table is deleted when the
// test ends.
func newWriter(t *testing.T) *nft.Writer {
	t.Helper()
	w, err := nft.NewLinux(testConfig)
	if err != nil {
		t.Fatalf("NewLinux: %v", err)
	}
	t.Cleanup(func() {
		if err := w.Cleanup(); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
	})
	return w
}

func newConn(t *testing.T) *nftables.Conn {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatalf("nftables.New: %v", err)
	}
	return c
}

// ruleReader reads rules as the writer does (nft.NewRuleReader, which
// decodes the ct expressions google/nftables alone cannot: a ct set, and
// a direction other tables' rules may carry).
func ruleReader(t *testing.T) *nft.RuleReader {
	t.Helper()
	c, err := nft.NewRuleReader()
	if err != nil {
		t.Fatalf("NewRuleReader: %v", err)
	}
	return c
}

// kernelDump reads our table back from the kernel.
func kernelDump(t *testing.T, c *nftables.Conn) string {
	t.Helper()
	d, err := nftdump.DumpTable(c, nftables.TableFamilyINet, nft.TableName)
	if err != nil {
		t.Fatalf("DumpTable: %v", err)
	}
	return d
}

// fakeDump is what the fake holds after the same calls.
func fakeDump(t *testing.T, steps func(w *nft.Writer) error) string {
	t.Helper()
	f := nft.NewFake()
	if err := steps(nft.New(testConfig, f)); err != nil {
		t.Fatalf("fake: %v", err)
	}
	return f.Dump()
}

// ruleCounts reads every chain of a table and counts its rules.
func ruleCounts(t *testing.T, c *nftables.Conn, table *nftables.Table) map[string]int {
	t.Helper()
	chains, err := c.ListChainsOfTableFamily(table.Family)
	if err != nil {
		t.Fatalf("ListChainsOfTableFamily: %v", err)
	}
	out := map[string]int{}
	for _, ch := range chains {
		if ch.Table.Name != table.Name {
			continue
		}
		rules, err := ruleReader(t).GetRules(table, ch)
		if err != nil {
			t.Fatalf("GetRules %s: %v", ch.Name, err)
		}
		out[ch.Name] = len(rules)
	}
	return out
}

func hasTable(t *testing.T, c *nftables.Conn, table *nftables.Table) bool {
	t.Helper()
	tables, err := c.ListTables()
	if err != nil {
		t.Fatalf("ListTables: %v", err)
	}
	return slices.ContainsFunc(tables, func(x *nftables.Table) bool { return x.Name == table.Name && x.Family == table.Family })
}

// TestResyncReadBack programs fullPlan and reads the table back with
// google/nftables: chains, rule counts, sets and their elements must be
// exactly the plan's, and the kernel must hold what the fake holds.
func TestResyncReadBack(t *testing.T) {
	w := newWriter(t)
	plan := fullPlan()
	if err := w.Resync(plan); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	c := newConn(t)
	if !hasTable(t, c, ourTable) {
		t.Fatalf("ListTables: table inet %s missing", nft.TableName)
	}
	if got := ruleCounts(t, c, ourTable); !cmp.Equal(got, wantRules) {
		t.Errorf("rules per chain (-want +got):\n%s", cmp.Diff(wantRules, got))
	}
	sets, err := c.GetSets(ourTable)
	if err != nil {
		t.Fatalf("GetSets: %v", err)
	}
	named, anonymous := 0, 0
	for _, s := range sets {
		if s.Anonymous {
			anonymous++
			continue
		}
		named++
		elems, err := c.GetSetElements(s)
		if err != nil {
			t.Fatalf("GetSetElements %s: %v", s.Name, err)
		}
		if len(elems) != len(wantElements[s.Name]) {
			t.Errorf("set %s: GetSetElements returned %d elements, want %d", s.Name, len(elems), len(wantElements[s.Name]))
		}
	}
	if named != 30 || anonymous != 2 {
		t.Errorf("GetSets: %d named and %d anonymous sets, want 30 and 2", named, anonymous)
	}
	got := kernelDump(t, c)
	if diff := cmp.Diff(wantElements, parseDump(got)); diff != "" {
		t.Errorf("kernel elements (-want +got):\n%s", diff)
	}
	want := fakeDump(t, func(w *nft.Writer) error { return w.Resync(plan) })
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kernel differs from the fake (-fake +kernel):\n%s", diff)
	}
	t.Logf("kernel table after Resync:\n%s", got)
}

// TestApplyOneService changes one service's destinations: only its
// elements change, and the rules stay as they were.
func TestApplyOneService(t *testing.T) {
	w := newWriter(t)
	plan := fullPlan()
	if err := w.Resync(plan); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	c := newConn(t)
	before := kernelDump(t, c)
	rulesBefore := ruleCounts(t, c, ourTable)

	web := servicePlan(plan, "default/web")
	// A local destination replaces another: their hairpin elements swap
	// (the remote 10.244.2.7 has none).
	web.VirtualServers[0].Destinations = []policy.Destination{dest("10.244.1.44", 8080), dest("10.244.2.7", 8080)}
	if err := w.Apply([]policy.ServicePlan{web}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	after := kernelDump(t, c)
	if got := ruleCounts(t, c, ourTable); !cmp.Equal(got, rulesBefore) {
		t.Errorf("rules per chain changed (-before +after):\n%s", cmp.Diff(rulesBefore, got))
	}
	added, removed := lineDiff(before, after)
	wantAdded := []string{"\t\t10.244.1.44 . tcp . 8080 . 10.244.1.44"}
	wantRemoved := []string{"\t\t10.244.1.5 . tcp . 8080 . 10.244.1.5"}
	if !slices.Equal(added, wantAdded) || !slices.Equal(removed, wantRemoved) {
		t.Errorf("Apply changed lines: added %q removed %q; want added %q removed %q", added, removed, wantAdded, wantRemoved)
	}
	want := fakeDump(t, func(w *nft.Writer) error {
		if err := w.Resync(plan); err != nil {
			return err
		}
		return w.Apply([]policy.ServicePlan{web})
	})
	if diff := cmp.Diff(want, after); diff != "" {
		t.Errorf("kernel differs from the fake (-fake +kernel):\n%s", diff)
	}

	// Deleting one of two services sharing 192.0.2.2 keeps the address.
	if err := w.Apply([]policy.ServicePlan{{Service: policy.ServiceKey{Namespace: "shop", Name: "a"}}}); err != nil {
		t.Fatalf("Apply (delete shop/a): %v", err)
	}
	sets := parseDump(kernelDump(t, c))
	if !slices.Contains(sets["service-ips-v4"], "192.0.2.2") || slices.Contains(sets["service-ports-v4"], "192.0.2.2 . tcp . 80") {
		t.Errorf("after deleting shop/a: service-ips-v4 %q, service-ports-v4 %q; want 192.0.2.2 kept, 192.0.2.2 . tcp . 80 gone",
			sets["service-ips-v4"], sets["service-ports-v4"])
	}
	if w.NeedsResync() {
		t.Errorf("NeedsResync after successful Apply calls")
	}
}

// lineDiff returns the lines only in after and only in before.
func lineDiff(before, after string) (added, removed []string) {
	b, a := strings.Split(before, "\n"), strings.Split(after, "\n")
	for _, l := range a {
		if !slices.Contains(b, l) {
			added = append(added, l)
		}
	}
	for _, l := range b {
		if !slices.Contains(a, l) {
			removed = append(removed, l)
		}
	}
	return added, removed
}

// addForeignTable creates table inet foreign with a chain and a counting
// rule, deleted when the test ends.
func addForeignTable(t *testing.T, c *nftables.Conn) *nftables.Table {
	t.Helper()
	tbl := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "foreign"})
	accept := nftables.ChainPolicyAccept
	ch := c.AddChain(&nftables.Chain{Name: "input", Table: tbl, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	c.AddRule(&nftables.Rule{Table: tbl, Chain: ch, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_UDP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(9999)},
		&expr.Counter{},
	}})
	if err := c.Flush(); err != nil {
		t.Fatalf("create table inet foreign: %v", err)
	}
	t.Cleanup(func() {
		c.DelTable(tbl)
		_ = c.Flush()
	})
	return tbl
}

// TestForeignTableSurvives checks that Resync, Apply and Cleanup leave
// another table alone, and that Cleanup removes ours only (twice: no error
// when it is already gone).
func TestForeignTableSurvives(t *testing.T) {
	c := newConn(t)
	foreign := addForeignTable(t, c)
	dumpForeign := func() string {
		d, err := nftdump.DumpTable(c, nftables.TableFamilyINet, "foreign")
		if err != nil {
			t.Fatalf("DumpTable foreign: %v", err)
		}
		return d
	}
	want := dumpForeign()
	if want == "" || ruleCounts(t, c, foreign)["input"] != 1 {
		t.Fatalf("table inet foreign not created as expected:\n%s", want)
	}
	w := newWriter(t)
	plan := fullPlan()
	check := func(step string) {
		t.Helper()
		if !hasTable(t, c, foreign) {
			t.Fatalf("after %s: table inet foreign is gone", step)
		}
		if got := dumpForeign(); got != want {
			t.Errorf("after %s: table inet foreign changed (-want +got):\n%s", step, cmp.Diff(want, got))
		}
	}
	if err := w.Resync(plan); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	check("Resync")
	if err := w.Apply([]policy.ServicePlan{{Service: policy.ServiceKey{Namespace: "default", Name: "web"}}}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	check("Apply")
	if err := w.Cleanup(); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	check("Cleanup")
	if hasTable(t, c, ourTable) {
		t.Errorf("after Cleanup: table inet %s still listed", nft.TableName)
	}
	if err := w.Cleanup(); err != nil {
		t.Errorf("second Cleanup (no table): %v", err)
	}
	check("second Cleanup")
	if !w.NeedsResync() {
		t.Errorf("NeedsResync is false after Cleanup")
	}
}

// TestResyncAtomic rebuilds a table that already exists (what Resync
// falls back to): a monitor must see the whole replacement (table deleted
// and re-created, every set filled) as one transaction, one generation,
// and the result must equal the first resync.
func TestResyncAtomic(t *testing.T) {
	w := newWriter(t)
	plan := fullPlan()
	if err := w.Resync(plan); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	c := newConn(t)
	first := kernelDump(t, c)

	mc, err := nftables.New(nftables.WithSockOptions(bigReadBuffer))
	if err != nil {
		t.Fatalf("nftables.New: %v", err)
	}
	mon := nftables.NewMonitor(nftables.WithMonitorEventBuffer(16))
	events, err := mc.AddGenerationalMonitor(mon)
	if err != nil {
		t.Fatalf("AddGenerationalMonitor: %v", err)
	}
	defer mon.Close()
	if err := rebuildTable(plan); err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
	var gens []*nftables.MonitorEvents
	timeout := time.After(3 * time.Second)
collect:
	for {
		select {
		case ev := <-events:
			gens = append(gens, ev)
		case <-timeout:
			break collect
		}
	}
	if len(gens) != 1 {
		t.Fatalf("monitor saw %d generations during one Resync, want 1", len(gens))
	}
	if err := gens[0].GeneratedBy.Error; err != nil {
		t.Fatalf("monitor: %v", err)
	}
	counts := map[nftables.MonitorEventType]int{}
	for _, ev := range gens[0].Changes {
		counts[ev.Type]++
	}
	t.Logf("one generation: %d changes (%d table deletes, %d table adds, %d sets, %d element messages, %d rules)",
		len(gens[0].Changes), counts[nftables.MonitorEventTypeDelTable], counts[nftables.MonitorEventTypeNewTable],
		counts[nftables.MonitorEventTypeNewSet], counts[nftables.MonitorEventTypeNewSetElem], counts[nftables.MonitorEventTypeNewRule])
	rules := 0
	for _, n := range wantRules {
		rules += n
	}
	if counts[nftables.MonitorEventTypeDelTable] != 1 || counts[nftables.MonitorEventTypeNewTable] < 1 ||
		counts[nftables.MonitorEventTypeNewRule] != rules || counts[nftables.MonitorEventTypeNewSetElem] == 0 {
		t.Errorf("the generation does not hold the whole replacement: %v", counts)
	}
	if got := kernelDump(t, c); got != first {
		t.Errorf("table after Rebuild differs (-first +second):\n%s", cmp.Diff(first, got))
	}
}

// TestResyncReaderSeesWholeTable polls a set while the table is replaced
// again and again (rebuild, Resync's fallback): the reader never finds it
// missing or partly filled.
func TestResyncReaderSeesWholeTable(t *testing.T) {
	w := newWriter(t)
	plan := fullPlan()
	if err := w.Resync(plan); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	c := newConn(t)
	stop := make(chan struct{})
	seen := make(chan string, 1)
	go func() {
		defer close(seen)
		reads, interrupted := 0, 0
		for {
			select {
			case <-stop:
				seen <- fmt.Sprintf("%d reads (%d interrupted by a commit and retried)", reads, interrupted)
				return
			default:
			}
			// A read is two requests (find the set, dump its elements); a
			// commit between them can make the second fail with ENOENT,
			// like any interrupted dump: retry it. What must never happen
			// is a read that succeeds with part of the elements.
			s, err := c.GetSetByName(ourTable, "service-ports-v4")
			var elems []nftables.SetElement
			if err == nil {
				elems, err = c.GetSetElements(s)
			}
			// google/nftables wraps some receive errors with %v, so
			// ENOENT is matched by its text too (CI saw one such).
			if err != nil && (errors.Is(err, unix.ENOENT) || strings.Contains(err.Error(), unix.ENOENT.Error())) && interrupted < 1000 {
				interrupted++
				continue
			}
			if err != nil || len(elems) != len(wantElements["service-ports-v4"]) {
				seen <- fmt.Sprintf("read %d: %d elements, err %v", reads, len(elems), err)
				return
			}
			reads++
		}
	}()
	for i := range 20 {
		if err := rebuildTable(plan); err != nil {
			close(stop)
			t.Fatalf("Rebuild %d: %v", i, err)
		}
	}
	close(stop)
	if msg := <-seen; !strings.Contains(msg, " reads (") {
		t.Errorf("reader during 20 resyncs: %s", msg)
	} else {
		t.Logf("reader during 20 resyncs: %s, all complete", msg)
	}
}
