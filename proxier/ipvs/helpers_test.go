package ipvs

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/plantest"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// Plan builders shared with the other writer tests.
var (
	svc  = plantest.Service
	vs   = plantest.VirtualServer
	plan = plantest.Plan
)

// env is a Writer over fakes with a settable clock.
type env struct {
	t     *testing.T
	k     *FakeKernel
	l     *FakeLinks
	sys   *FakeSysctls
	now   time.Time
	cfg   Config
	w     *Writer
	trace []string // every kernel change, in order
	rec   FaultFunc
}

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	e := &env{t: t, k: NewFakeKernel(), l: NewFakeLinks(), sys: NewFakeSysctls(),
		now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	if err := e.l.AddLink("eth0", "veth"); err != nil {
		t.Fatal(err)
	}
	if err := e.l.AddAddr("eth0", netip.MustParsePrefix("192.168.1.10/24")); err != nil {
		t.Fatal(err)
	}
	record := func(op, target string) error {
		if !strings.HasPrefix(op, "list-") && !strings.HasPrefix(op, "get-") {
			e.trace = append(e.trace, op+" "+target)
		}
		return nil
	}
	e.rec = record
	e.k.Fault, e.l.Fault, e.sys.Fault = record, record, record
	cfg.Now = func() time.Time { return e.now }
	e.cfg = cfg
	e.w = New(cfg, e.k, e.l, e.sys)
	return e
}

// restart replaces the Writer with a new one over the same kernel.
func (e *env) restart() { e.w = New(e.cfg, e.k, e.l, e.sys) }

func (e *env) advance(d time.Duration) { e.now = e.now.Add(d) }

// fault makes the fakes fail op on target with err (nil clears it).
func (e *env) fault(op, target string, err error) {
	f := func(o, tg string) error {
		if o == op && tg == target && err != nil {
			return err
		}
		return e.rec(o, tg)
	}
	e.k.Fault, e.l.Fault, e.sys.Fault = f, f, f
}

func (e *env) apply(changes ...policy.ServicePlan) error {
	e.t.Helper()
	e.trace = nil
	return e.w.Apply(changes)
}

func (e *env) mustApply(changes ...policy.ServicePlan) {
	e.t.Helper()
	if err := e.apply(changes...); err != nil {
		e.t.Fatalf("Apply: %v", err)
	}
}

func (e *env) resync(plan policy.Plan) error {
	e.t.Helper()
	e.trace = nil
	return e.w.Resync(plan)
}

func (e *env) mustResync(plan policy.Plan) {
	e.t.Helper()
	if err := e.resync(plan); err != nil {
		e.t.Fatalf("Resync: %v", err)
	}
}

// opsDelta returns the ops made by fn.
func (e *env) opsDelta(fn func()) map[string]int {
	before := e.w.Ops()
	fn()
	after := e.w.Ops()
	d := map[string]int{}
	for k, v := range after {
		if n := v - before[k]; n != 0 {
			d[k] = n
		}
	}
	return d
}

func (e *env) dump() string {
	return e.k.Dump() + e.l.Dump()
}

func opsString(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

func key(s string) Key {
	ap, proto, _ := strings.Cut(s, "/")
	a := netip.MustParseAddrPort(ap)
	return Key{Address: a.Addr(), Protocol: policy.Protocol(proto), Port: a.Port()}
}

func dest(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
