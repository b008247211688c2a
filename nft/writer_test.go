package nft

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/golden"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"golang.org/x/sys/unix"
)

func resynced(t *testing.T, plan policy.Plan) (*Writer, *Fake) {
	t.Helper()
	f := NewFake()
	w := New(testConfig, f)
	if err := w.Resync(plan); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	return w, f
}

func TestResyncGolden(t *testing.T) {
	_, f := resynced(t, fullPlan())
	golden.Check(t, "testdata/resync-full.golden", f.Dump())
}

// Rebuild is one batch that adds, deletes and re-creates the table, and
// leaves the same state.
func TestRebuildReplacesTable(t *testing.T) {
	w, f := resynced(t, fullPlan())
	first := f.Dump()
	if err := w.Rebuild(fullPlan()); err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
	if got := f.Dump(); got != first {
		t.Errorf("Rebuild changed the table:\n%s", got)
	}
	batch := f.LastBatch()
	want := []string{"add table inet kube-ipvs-proxy", "delete table inet kube-ipvs-proxy", "add table inet kube-ipvs-proxy"}
	if len(batch) < 3 || strings.Join(batch[:3], "\n") != strings.Join(want, "\n") {
		t.Errorf("batch starts %q, want %q", batch[:3], want)
	}
	if f.Flushes() != 2 || !w.LastResync().Rebuilt {
		t.Errorf("%d flushes for a Resync and a Rebuild, want 2; LastResync %+v", f.Flushes(), w.LastResync())
	}
}

// The Apply golden file holds, after each step, the messages of its batch
// and the whole fake state.
func TestApplySequenceGolden(t *testing.T) {
	plan := fullPlan()
	w, f := resynced(t, plan)
	web := servicePlan(plan, "default/web")
	web.VirtualServers[0].Destinations = []policy.Destination{dest("10.244.1.5", 8080), dest("10.244.4.4", 8080)}
	empty := servicePlan(plan, "default/empty")
	empty.VirtualServers[0].WhenEmpty = policy.EmptyDrop
	emptyFilled := servicePlan(plan, "default/empty")
	for i := range emptyFilled.VirtualServers {
		emptyFilled.VirtualServers[i].WhenEmpty = ""
		emptyFilled.VirtualServers[i].Destinations = []policy.Destination{dest("10.244.5.5", 80)}
	}
	emptyFilled.VirtualServers[1].Destinations = []policy.Destination{dest("fd00:244:5::5", 80)}
	lb := servicePlan(plan, "default/lb")
	lb.VirtualServers[0].SourceRanges = append(lb.VirtualServers[0].SourceRanges, prefix("198.51.101.0/24"))
	steps := []struct {
		name    string
		changes []policy.ServicePlan
	}{
		{"web: one destination replaced", []policy.ServicePlan{web}},
		{"empty: Reject becomes Drop (map value change)", []policy.ServicePlan{empty}},
		{"empty: gets destinations", []policy.ServicePlan{emptyFilled}},
		{"lb: adjacent source range merges", []policy.ServicePlan{lb}},
		{"shop/a deleted: shared 192.0.2.2 stays", []policy.ServicePlan{{Service: key("shop/a")}}},
		{"shop/b deleted too: 192.0.2.2 goes", []policy.ServicePlan{{Service: key("shop/b")}}},
		{"no change", []policy.ServicePlan{servicePlan(plan, "kube-system/dns")}},
	}
	var b strings.Builder
	for _, s := range steps {
		flushes := f.Flushes()
		if err := w.Apply(s.changes); err != nil {
			t.Fatalf("%s: Apply: %v", s.name, err)
		}
		fmt.Fprintf(&b, "## %s\n", s.name)
		if f.Flushes() == flushes {
			b.WriteString("(no batch)\n")
		} else {
			for _, l := range f.LastBatch() {
				fmt.Fprintf(&b, "> %s\n", l)
			}
		}
	}
	b.WriteString("## final state\n")
	b.WriteString(f.Dump())
	golden.Check(t, "testdata/apply-sequence.golden", b.String())
}

// After the same changes, incremental Applies and a fresh Resync of the
// resulting plan leave identical state.
func TestApplyEqualsResync(t *testing.T) {
	plan := fullPlan()
	w, f := resynced(t, plan)
	web := servicePlan(plan, "default/web")
	web.VirtualServers = web.VirtualServers[:1]
	changes := []policy.ServicePlan{web, {Service: key("shop/a")}, {Service: key("kube-system/dns")}}
	if err := w.Apply(changes); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	var next policy.Plan
	for _, v := range plan.VirtualServers {
		if v.Service != key("shop/a") && v.Service != (policy.ServiceKey{Namespace: "kube-system", Name: "dns"}) && !(v.Service == (policy.ServiceKey{Namespace: "default", Name: "web"}) && v.Address.Is6()) {
			next.VirtualServers = append(next.VirtualServers, v)
		}
	}
	_, f2 := resynced(t, next)
	if f.Dump() != f2.Dump() {
		t.Errorf("Apply state differs from Resync state:\napply:\n%s\nresync:\n%s", f.Dump(), f2.Dump())
	}
}

func TestRefcountSharedExternalIP(t *testing.T) {
	plan := fullPlan()
	w, f := resynced(t, plan)
	has := func(line string) bool { return strings.Contains(f.Dump(), "\t\t"+line+"\n") }
	if err := w.Apply([]policy.ServicePlan{{Service: key("shop/a")}}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if !has("192.0.2.2") {
		t.Errorf("deleting shop/a removed 192.0.2.2, which shop/b still uses")
	}
	if has("192.0.2.2 . tcp . 80") || !has("192.0.2.2 . sctp . 81") {
		t.Errorf("service-ports after deleting shop/a: want 192.0.2.2 . tcp . 80 gone and . sctp . 81 kept:\n%s", f.Dump())
	}
	if got := countPrefix(f.LastBatch(), "delete element inet kube-ipvs-proxy service-ips-v4"); got != 0 {
		t.Errorf("batch deleted %d service-ips-v4 elements, want 0", got)
	}
	if err := w.Apply([]policy.ServicePlan{{Service: key("shop/b")}}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if has("192.0.2.2") {
		t.Errorf("192.0.2.2 kept after both services sharing it were deleted")
	}
	// Re-adding shop/a brings the address back.
	if err := w.Apply([]policy.ServicePlan{servicePlan(plan, "shop/a")}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if !has("192.0.2.2") {
		t.Errorf("192.0.2.2 missing after shop/a came back")
	}
}

// One service changing among 1000 costs a batch of its own elements only.
func TestApplyTouchesOnlyChangedService(t *testing.T) {
	plan := manyServices(1000)
	w, f := resynced(t, plan)
	sp := servicePlan(plan, "ns/svc-500")
	sp.VirtualServers[0].Destinations = sp.VirtualServers[0].Destinations[:1]
	if err := w.Apply([]policy.ServicePlan{sp}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	batch := f.LastBatch()
	want := []string{"delete element inet kube-ipvs-proxy hairpin-v4 10.244.1.244 . tcp . 8001 . 10.244.1.244"}
	if strings.Join(batch, "\n") != strings.Join(want, "\n") {
		t.Errorf("batch for one removed destination:\n%s\nwant:\n%s", strings.Join(batch, "\n"), strings.Join(want, "\n"))
	}
	if err := w.Apply([]policy.ServicePlan{{Service: key("ns/svc-7")}}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	// service-ips, service-ports, masquerade-off-cluster, two hairpins.
	if got := countPrefix(f.LastBatch(), "delete element "); got != 5 || len(f.LastBatch()) != 5 {
		t.Errorf("deleting one service: %d messages (%d element deletes), want 5:\n%s", len(f.LastBatch()), got, strings.Join(f.LastBatch(), "\n"))
	}
}

func TestRuleCountIsConstant(t *testing.T) {
	rules := func(plan policy.Plan) int {
		_, f := resynced(t, plan)
		return countPrefix(f.LastBatch(), "add rule ")
	}
	one, many := rules(manyServices(1)), rules(manyServices(1000))
	if one != many || one != 44 {
		t.Errorf("rules: %d for 1 service, %d for 1000, want 44 for both", one, many)
	}
}

// messageSizes is the Fake with the size of every element message
// recorded: a SetAddElements or SetDeleteElements call is one
// NEWSETELEM or DELSETELEM message on a real Conn (the Fake itself queues
// one op per element, so its LastBatch cannot show messages).
type messageSizes struct {
	*Fake
	add, del map[string][]int // set name: elements per message, in order
}

func newMessageSizes() *messageSizes {
	return &messageSizes{Fake: NewFake(), add: map[string][]int{}, del: map[string][]int{}}
}

func (m *messageSizes) SetAddElements(s *nftables.Set, vals []nftables.SetElement) error {
	m.add[s.Name] = append(m.add[s.Name], len(vals))
	return m.Fake.SetAddElements(s, vals)
}

func (m *messageSizes) SetDeleteElements(s *nftables.Set, vals []nftables.SetElement) error {
	m.del[s.Name] = append(m.del[s.Name], len(vals))
	return m.Fake.SetDeleteElements(s, vals)
}

// Elements of a large resync, and of a large delete, are split into
// messages that fit a netlink attribute (elementsPerMessage each).
func TestElementsAreSplitIntoMessages(t *testing.T) {
	const services, hairpins = 1000, 2000 // manyServices: two local pods each
	if elementsPerMessage >= hairpins {
		t.Fatalf("elementsPerMessage %d: the test needs more than one message's worth", elementsPerMessage)
	}
	// want: full messages, then the rest.
	var want []int
	for n := hairpins; n > 0; n -= elementsPerMessage {
		want = append(want, min(n, elementsPerMessage))
	}
	check := func(what string, sizes map[string][]int) {
		t.Helper()
		if got := sizes["hairpin-v4"]; !slices.Equal(got, want) {
			t.Errorf("%s: hairpin-v4 messages of %v elements, want %v", what, got, want)
		}
		for name, ns := range sizes {
			for _, n := range ns {
				if n > elementsPerMessage || n == 0 {
					t.Errorf("%s: a message of %d elements to %s, want 1 to %d", what, n, name, elementsPerMessage)
				}
			}
		}
	}

	m := newMessageSizes()
	w := New(testConfig, m)
	if err := w.Resync(manyServices(services)); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	check("Resync", m.add)
	if got := countPrefix(m.LastBatch(), "add element inet kube-ipvs-proxy hairpin-v4 "); got != hairpins {
		t.Errorf("Resync: %d hairpin-v4 elements, want %d", got, hairpins)
	}

	m.add, m.del = map[string][]int{}, map[string][]int{}
	var gone []policy.ServicePlan
	for i := range services {
		gone = append(gone, policy.ServicePlan{Service: key(fmt.Sprintf("ns/svc-%d", i))})
	}
	if err := w.Apply(gone); err != nil {
		t.Fatalf("Apply deleting every service: %v", err)
	}
	check("Apply", m.del)
	if _, empty := resynced(t, policy.Plan{Node: "node-a"}); m.Dump() != empty.Dump() {
		t.Errorf("Apply deleting every service left:\n%s\nwant the empty plan's table:\n%s", m.Dump(), empty.Dump())
	}
}

func TestFailedApplyNeedsResync(t *testing.T) {
	plan := fullPlan()
	w, f := resynced(t, plan)
	if w.NeedsResync() {
		t.Fatalf("NeedsResync after a successful Resync")
	}
	before := f.Dump()
	f.FailNextFlush(unix.ENOBUFS)
	err := w.Apply([]policy.ServicePlan{{Service: key("shop/a")}})
	if !errors.Is(err, unix.ENOBUFS) {
		t.Fatalf("Apply with a failing flush: %v, want ENOBUFS", err)
	}
	if !w.NeedsResync() {
		t.Errorf("NeedsResync is false after a failed Apply")
	}
	if f.Dump() != before {
		t.Errorf("a failed batch changed the fake")
	}
	if err := w.Apply(nil); !errors.Is(err, ErrNeedsResync) {
		t.Errorf("Apply after a failure: %v, want ErrNeedsResync", err)
	}
	if err := w.Resync(plan); err != nil || w.NeedsResync() {
		t.Errorf("Resync after a failure: %v, NeedsResync %t", err, w.NeedsResync())
	}
}

// withoutOurTable drops table inet kube-ipvs-proxy from a Dump.
func withoutOurTable(dump string) string {
	var b strings.Builder
	ours := false
	for _, line := range strings.SplitAfter(dump, "\n") {
		if strings.HasPrefix(line, "table ") {
			ours = line == "table inet "+TableName+"\n"
		}
		if !ours {
			b.WriteString(line)
		}
	}
	return b.String()
}

// An element deleted behind the writer's back makes the kernel refuse the
// batch (ENOENT); the writer asks for a Resync, which repairs it.
func TestKernelRefusalNeedsResync(t *testing.T) {
	plan := fullPlan()
	w, f := resynced(t, plan)
	s := newSets(w.table)[idOf(setServicePorts, familyV4)]
	_ = f.SetDeleteElements(s, []nftables.SetElement{{Key: []byte(keyBuf(nil).addr(addr("192.0.2.2")).proto(unix.IPPROTO_TCP).port(80))}})
	if err := f.Flush(); err != nil {
		t.Fatalf("delete behind the writer's back: %v", err)
	}
	err := w.Apply([]policy.ServicePlan{{Service: key("shop/a")}})
	if !errors.Is(err, unix.ENOENT) || !w.NeedsResync() {
		t.Fatalf("Apply: %v, NeedsResync %t; want ENOENT and true", err, w.NeedsResync())
	}
	if err := w.Resync(plan); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	if !strings.Contains(f.Dump(), "\t\t192.0.2.2 . tcp . 80\n") {
		t.Errorf("Resync did not restore the deleted element")
	}
}

func TestApplyBeforeResync(t *testing.T) {
	w := New(testConfig, NewFake())
	if !w.NeedsResync() {
		t.Errorf("a new writer does not need a Resync")
	}
	if err := w.Apply(nil); !errors.Is(err, ErrNeedsResync) {
		t.Errorf("Apply before Resync: %v, want ErrNeedsResync", err)
	}
}

func TestCleanupLeavesForeignTable(t *testing.T) {
	f := NewFake()
	foreign := f.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "foreign"})
	ch := f.AddChain(&nftables.Chain{Name: "input", Table: foreign, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter})
	f.AddRule(&nftables.Rule{Table: foreign, Chain: ch, Exprs: []expr.Any{&expr.Counter{}}})
	// Same name, other family: not ours either.
	f.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName})
	if err := f.Flush(); err != nil {
		t.Fatalf("foreign tables: %v", err)
	}
	others := f.Dump()
	w := New(testConfig, f)
	for _, step := range []struct {
		name string
		do   func() error
	}{
		{"Resync", func() error { return w.Resync(fullPlan()) }},
		{"Apply", func() error { return w.Apply([]policy.ServicePlan{{Service: key("default/web")}}) }},
		{"Cleanup", w.Cleanup},
		{"Cleanup without our table", w.Cleanup},
	} {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if got := withoutOurTable(f.Dump()); got != others {
			t.Errorf("after %s the foreign tables changed:\n%s", step.name, got)
		}
	}
	if got := f.Dump(); got != others {
		t.Errorf("after Cleanup:\n%s\nwant only the foreign tables:\n%s", got, others)
	}
	if !w.NeedsResync() {
		t.Errorf("NeedsResync is false after Cleanup")
	}
}

func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      Config
		wantErr  bool
		wantMark uint32
	}{
		{name: "zero bit means 14", cfg: Config{}, wantMark: 0x4000},
		{name: "bit 31", cfg: Config{MasqueradeBit: 31}, wantMark: 0x80000000},
		{name: "negative bit", cfg: Config{MasqueradeBit: -1}, wantErr: true},
		{name: "bit 32", cfg: Config{MasqueradeBit: 32}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if (err != nil) != tc.wantErr {
				t.Fatalf("Validate: %v, want error %t", err, tc.wantErr)
			}
			if err == nil {
				if got := tc.cfg.withDefaults().mark(); got != tc.wantMark {
					t.Errorf("mark %#x, want %#x", got, tc.wantMark)
				}
			} else if err := New(tc.cfg, NewFake()).Resync(policy.Plan{}); err == nil {
				t.Errorf("Resync accepted an invalid config")
			}
		})
	}
}

// TestCheckNoticesFlushedRules: `nft flush table` leaves our sets but no
// rule; Check notices it with one more read, asks for a Resync, and the
// Resync restores every rule.
func TestCheckNoticesFlushedRules(t *testing.T) {
	f := NewFake()
	w := New(Config{}, f)
	plan := fullPlan()
	if err := w.Resync(plan); err != nil {
		t.Fatal(err)
	}
	want := f.Dump()
	f.FlushTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: TableName})
	if err := f.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := w.Check(); !errors.Is(err, ErrNeedsResync) || !w.NeedsResync() {
		t.Fatalf("Check after the rules were flushed: %v, NeedsResync %v; want ErrNeedsResync, true", err, w.NeedsResync())
	}
	if err := w.Resync(plan); err != nil {
		t.Fatal(err)
	}
	if got := f.Dump(); got != want {
		t.Errorf("after Resync:\n%s\nwant:\n%s", got, want)
	}
	if err := w.Check(); err != nil {
		t.Errorf("Check after the Resync: %v", err)
	}
}

// TestCheckNoticesADeletedTable: once someone deletes our table, Check
// and Apply notice it with one read, change nothing, and ask for a
// Resync, which restores it; Check is silent while a Resync is due.
func TestCheckNoticesADeletedTable(t *testing.T) {
	f := NewFake()
	w := New(Config{}, f)
	if err := w.Check(); err != nil {
		t.Fatalf("Check before the first Resync: %v", err)
	}
	plan := fullPlan()
	if err := w.Resync(plan); err != nil {
		t.Fatal(err)
	}
	if err := w.Check(); err != nil {
		t.Fatalf("Check with the table in place: %v", err)
	}
	for _, via := range []string{"Check", "Apply"} {
		t.Run(via, func(t *testing.T) {
			f.DelTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: TableName})
			if err := f.Flush(); err != nil {
				t.Fatal(err)
			}
			flushes := f.Flushes()
			var err error
			if via == "Check" {
				err = w.Check()
			} else {
				err = w.Apply([]policy.ServicePlan{servicePlan(plan, "default/web")})
			}
			if !errors.Is(err, ErrNeedsResync) || !w.NeedsResync() || f.Flushes() != flushes {
				t.Fatalf("%s: %v, NeedsResync %v, %d flushes; want ErrNeedsResync, true, none", via, err, w.NeedsResync(), f.Flushes()-flushes)
			}
			if err := w.Check(); err != nil {
				t.Errorf("Check while a Resync is due: %v, want nil", err)
			}
			if err := w.Resync(plan); err != nil || w.Check() != nil {
				t.Errorf("Resync: %v; Check after it: %v", err, w.Check())
			}
		})
	}
}

// TestConnMarkNeverSharesTheMasqueradeBit: the conntrack mark bit of
// service connections is bit 13, or bit 12 when the masquerade bit is
// configured to 13, so that a tool copying ct marks into packet marks
// cannot make them masquerade marks.
func TestConnMarkNeverSharesTheMasqueradeBit(t *testing.T) {
	for _, tc := range []struct {
		name string
		bit  int
		want uint32
	}{
		{name: "default masquerade bit 14", bit: 0, want: 0x2000},
		{name: "masquerade bit 15", bit: 15, want: 0x2000},
		{name: "masquerade bit 13", bit: 13, want: 0x1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{MasqueradeBit: tc.bit}.withDefaults()
			if got := cfg.connMark(); got != tc.want || got == cfg.mark() {
				t.Errorf("conntrack mark %#x (masquerade mark %#x), want %#x", got, cfg.mark(), tc.want)
			}
		})
	}
}
