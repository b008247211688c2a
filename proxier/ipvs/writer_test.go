package ipvs

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/golden"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// web, dns and node are a small cluster's services on node 192.168.1.10.
func web(dests ...string) policy.ServicePlan {
	return svc("web",
		vs("ClusterIP 10.96.0.10:80/TCP", dests...),
		vs("NodePort 192.168.1.10:30080/TCP", dests...),
		vs("LoadBalancer 203.0.113.10:80/TCP", dests...))
}

func dns(dests ...string) policy.ServicePlan {
	return svc("dns", vs("ClusterIP 10.96.0.53:53/UDP", dests...), vs("ClusterIP 10.96.0.53:53/TCP", dests...))
}

func TestFirstSync(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(e *env) error
	}{
		{"apply", func(e *env) error { return e.apply(web("10.244.1.5:8080", "10.244.2.5:8080*3"), dns("10.244.1.7:53")) }},
		{"resync", func(e *env) error {
			return e.resync(plan(web("10.244.1.5:8080", "10.244.2.5:8080*3"), dns("10.244.1.7:53")))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{StrictARP: true})
			if err := tc.run(e); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "testdata/first-sync.golden", e.dump()+e.sys.Dump()+"ops "+opsString(e.w.Ops())+"\n")
		})
	}
}

// TestOrder checks that one Apply adds everything before it updates, and
// updates before it prunes.
func TestOrder(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustApply(web("10.244.1.5:8080", "10.244.2.5:8080"), svc("old", vs("ClusterIP 10.96.0.99:80/TCP", "10.244.9.9:80")))
	newWeb := web("10.244.1.5:8080*2", "10.244.3.5:8080")
	newWeb.VirtualServers[0].Scheduler = "wrr"
	newWeb.VirtualServers = newWeb.VirtualServers[:2] // LoadBalancer gone
	e.mustApply(newWeb, svc("old"), svc("new", vs("ClusterIP 10.96.0.77:80/TCP", "10.244.7.7:80")))
	want := []string{
		"add-address kube-ipvs0 10.96.0.77/32",
		"add-destination 10.96.0.10:80/TCP 10.244.3.5:8080",
		"add-destination 192.168.1.10:30080/TCP 10.244.3.5:8080",
		"add-service 10.96.0.77:80/TCP",
		"add-destination 10.96.0.77:80/TCP 10.244.7.7:80",
		"update-service 10.96.0.10:80/TCP",
		"update-destination 10.96.0.10:80/TCP 10.244.1.5:8080",
		"update-destination 192.168.1.10:30080/TCP 10.244.1.5:8080",
		"delete-destination 10.96.0.10:80/TCP 10.244.2.5:8080",
		"delete-destination 192.168.1.10:30080/TCP 10.244.2.5:8080",
		"delete-service 203.0.113.10:80/TCP",
		"delete-service 10.96.0.99:80/TCP",
		"delete-address kube-ipvs0 203.0.113.10/32",
		"delete-address kube-ipvs0 10.96.0.99/32",
	}
	if diff := cmp.Diff(want, e.trace); diff != "" {
		t.Errorf("kernel changes (-want +got):\n%s", diff)
	}
	golden.Check(t, "testdata/order.golden", e.dump())
}

func TestRestartMakesNoChanges(t *testing.T) {
	full := []policy.ServicePlan{web("10.244.1.5:8080", "10.244.2.5:8080*3"), dns("10.244.1.7:53")}
	sticky := vs("ClusterIP 10.96.0.20:443/TCP", "10.244.1.8:8443")
	sticky.PersistenceTimeoutSeconds = 10800
	mh := vs("ClusterIP 10.96.0.21:80/TCP", "10.244.1.9:80")
	mh.Scheduler, mh.SchedulerFlags = "mh", []string{"mh-fallback", "mh-port"}
	full = append(full, svc("sticky", sticky), svc("mh", mh))
	// 900.5 s: the kernel keeps whole seconds, and the restart must not
	// set 900.5 again over the 900 it reads back.
	cfg := Config{StrictARP: true, TCPTimeout: 900*time.Second + 500*time.Millisecond, UDPTimeout: 60e9}
	for _, tc := range []struct {
		name string
		run  func(e *env) error
	}{
		{"resync", func(e *env) error { return e.resync(plan(full...)) }},
		{"apply", func(e *env) error { return e.apply(full...) }},
		{"apply one service", func(e *env) error { return e.apply(full[1]) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, cfg)
			e.mustResync(plan(full...))
			e.restart()
			if d := e.opsDelta(func() {
				if err := tc.run(e); err != nil {
					t.Fatal(err)
				}
			}); len(d) != 0 {
				t.Errorf("restart with the same plan made changes: %v (%v)", d, e.trace)
			}
		})
	}
}

// TestOneChangeOneOp: after the first sync, one endpoint change is one
// destination operation per virtual server it is in.
func TestOneChangeOneOp(t *testing.T) {
	one := func(dests ...string) policy.ServicePlan {
		return svc("one", vs("ClusterIP 10.96.0.10:80/TCP", dests...))
	}
	udp := func(dests ...string) policy.ServicePlan {
		return svc("udp", vs("ClusterIP 10.96.0.53:53/UDP", dests...))
	}
	for _, tc := range []struct {
		name          string
		before, after policy.ServicePlan
		want          map[string]int
	}{
		{"endpoint added", one("10.244.1.5:80"), one("10.244.1.5:80", "10.244.1.6:80"), map[string]int{"add-destination": 1}},
		{"idle endpoint removed", one("10.244.1.5:80", "10.244.1.6:80"), one("10.244.1.5:80"), map[string]int{"delete-destination": 1}},
		{"weight changed", one("10.244.1.5:80", "10.244.1.6:80"), one("10.244.1.5:80*7", "10.244.1.6:80"), map[string]int{"update-destination": 1}},
		{"UDP endpoint removed", udp("10.244.1.5:53", "10.244.1.6:53"), udp("10.244.1.5:53"), map[string]int{"delete-destination": 1}},
		{"no change", one("10.244.1.5:80"), one("10.244.1.5:80"), map[string]int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.mustApply(tc.before)
			got := e.opsDelta(func() { e.mustApply(tc.after) })
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ops (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPersistenceAndSchedulerFlags(t *testing.T) {
	for _, tc := range []struct {
		name      string
		scheduler string
		flags     []string
		timeout   uint32
		want      string
		wantErr   string
	}{
		{name: "plain rr", scheduler: "rr", want: "rr flags=0x0 timeout=0"},
		{name: "persistence", scheduler: "rr", timeout: 10800, want: "rr flags=0x1 timeout=10800"},
		{name: "mh fallback and port", scheduler: "mh", flags: []string{"mh-fallback", "mh-port"}, want: "mh flags=0x18 timeout=0"},
		{name: "sh port with persistence", scheduler: "sh", flags: []string{"sh-port"}, timeout: 60, want: "sh flags=0x11 timeout=60"},
		{name: "sh fallback", scheduler: "sh", flags: []string{"sh-fallback"}, want: "sh flags=0x8 timeout=0"},
		{name: "unknown flag", scheduler: "sh", flags: []string{"sh-bogus"}, wantErr: `unknown scheduler flag "sh-bogus"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			v := vs("ClusterIP 10.96.0.10:80/TCP", "10.244.1.5:80")
			v.Scheduler, v.SchedulerFlags, v.PersistenceTimeoutSeconds = tc.scheduler, tc.flags, tc.timeout
			err := e.apply(svc("s", v))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Apply error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := strings.SplitN(e.k.Dump(), "\n", 2)[0]
			if want := "TCP 10.96.0.10:80 " + tc.want; got != want {
				t.Errorf("got %q, want %q", got, want)
			}
			// Changing it back is one update-service.
			v.SchedulerFlags, v.PersistenceTimeoutSeconds, v.Scheduler = nil, 0, "rr"
			d := e.opsDelta(func() { e.mustApply(svc("s", v)) })
			if want := (map[string]int{"update-service": 1}); tc.want != "rr flags=0x0 timeout=0" && !cmp.Equal(d, want) {
				t.Errorf("reverting made %v, want %v", d, want)
			}
		})
	}
}

func TestDummyAddressRefcount(t *testing.T) {
	a := svc("a", vs("LoadBalancer 203.0.113.10:80/TCP", "10.244.1.5:80"))
	b := svc("b", vs("LoadBalancer 203.0.113.10:443/TCP", "10.244.1.6:443"), vs("ExternalIP 198.51.100.1:443/TCP", "10.244.1.6:443"))
	e := newEnv(t, Config{})
	e.mustApply(a, b)
	if got := e.w.Ops()["add-address"]; got != 2 {
		t.Errorf("add-address ops = %d, want 2 (one per address)", got)
	}
	e.mustApply(svc("a"))
	if !strings.Contains(e.l.Dump(), "203.0.113.10/32") {
		t.Errorf("203.0.113.10 removed while b still uses it:\n%s", e.l.Dump())
	}
	e.mustApply(svc("b"))
	golden.Check(t, "testdata/address-refcount.golden", e.dump())
	if got := e.w.Ops()["delete-address"]; got != 2 {
		t.Errorf("delete-address ops = %d, want 2", got)
	}
}

func TestResyncRepairsDrift(t *testing.T) {
	e := newEnv(t, Config{})
	p := plan(web("10.244.1.5:8080", "10.244.2.5:8080"), dns("10.244.1.7:53"))
	e.mustResync(p)
	// Drift by hand: a virtual server deleted, a weight changed, a
	// destination added, a dummy address removed, a stale VIP added.
	must(t, e.k.DeleteVirtualServer(key("10.96.0.53:53/UDP")))
	must(t, e.k.UpdateDestination(key("10.96.0.10:80/TCP"), Destination{Addr: netip.MustParseAddr("10.244.1.5"), Port: 8080, Weight: 9}))
	must(t, e.k.AddDestination(key("10.96.0.10:80/TCP"), Destination{Addr: netip.MustParseAddr("10.244.6.6"), Port: 8080, Weight: 1}))
	must(t, e.l.DelAddr("kube-ipvs0", netip.MustParsePrefix("203.0.113.10/32")))
	must(t, e.l.AddAddr("kube-ipvs0", netip.MustParsePrefix("10.96.0.99/32")))
	must(t, e.k.AddVirtualServer(VirtualServer{Key: key("10.96.0.99:80/TCP"), Scheduler: "rr"}))
	before := e.dump()
	// Apply (incremental) does not look at the kernel again...
	e.mustApply()
	if e.dump() != before {
		t.Errorf("Apply without changes touched the kernel")
	}
	// ...Resync does.
	e.mustResync(p)
	golden.Check(t, "testdata/resync-drift.golden", e.dump()+"changes:\n  "+strings.Join(e.trace, "\n  ")+"\n")
	e.restart()
	if d := e.opsDelta(func() { e.mustResync(p) }); len(d) != 0 {
		t.Errorf("second Resync made changes: %v", d)
	}
}

func TestCleanup(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart bool
	}{{"same writer", false}, {"fresh process", true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			addForeign(t, e)
			e.mustResync(plan(web("10.244.1.5:8080"), dns("10.244.1.7:53")))
			if tc.restart {
				e.restart()
			}
			if err := e.w.Cleanup(); err != nil {
				t.Fatal(err)
			}
			name := "cleanup"
			if tc.restart {
				// A fresh process has no plan, and here no record
				// (AdoptRecorded): the NodePort virtual server on the
				// node address cannot be told from a foreign one and
				// stays.
				name = "cleanup-fresh"
			}
			golden.Check(t, "testdata/"+name+".golden", e.dump())
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestExternalIPOnANodeAddressIsNotBound: an external IP that is a node's
// address (policy's OnNodeAddress) gets its virtual server, but its
// address is not put on the dummy interface, as kube-proxy's IPVS mode.
func TestExternalIPOnANodeAddressIsNotBound(t *testing.T) {
	onNode := vs("ExternalIP 192.168.1.10:80/TCP", "10.244.1.5:80")
	onNode.OnNodeAddress = true
	e := newEnv(t, Config{})
	e.mustApply(svc("ingress", onNode, vs("ExternalIP 203.0.113.9:80/TCP", "10.244.1.5:80")))
	if _, err := e.k.VirtualServer(key("192.168.1.10:80/TCP")); err != nil {
		t.Errorf("virtual server 192.168.1.10:80/TCP: %v", err)
	}
	links := e.l.Dump()
	if !strings.Contains(links, "203.0.113.9/32") || strings.Contains(links, "192.168.1.10/32") {
		t.Errorf("kube-ipvs0 should hold 203.0.113.9/32 and not the node address 192.168.1.10:\n%s", links)
	}
}

// closingKernel is a fake kernel that counts its Close calls.
type closingKernel struct {
	*FakeKernel
	closed *int
}

func (c closingKernel) Close() { *c.closed++ }

// TestCloseClosesEveryHandle: Close closes the handles the Writer was
// given, Config.RepairReader's too (an open handle keeps its network
// namespace alive, with the IPVS state in it), each once.
func TestCloseClosesEveryHandle(t *testing.T) {
	for _, tc := range []struct {
		name       string
		sameReader bool
		want       [2]int // closes of the kernel handle and of the reader
	}{
		{name: "a second handle for the reader", want: [2]int{1, 1}},
		{name: "the kernel handle as the reader", sameReader: true, want: [2]int{1, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var closed [2]int
			k := closingKernel{FakeKernel: NewFakeKernel(), closed: &closed[0]}
			r := closingKernel{FakeKernel: k.FakeKernel, closed: &closed[1]}
			if tc.sameReader {
				r = k
			}
			New(Config{RepairReader: r}, k, NewFakeLinks(), NewFakeSysctls()).Close()
			if closed != tc.want {
				t.Errorf("closes of the kernel handle and the reader: %v, want %v", closed, tc.want)
			}
		})
	}
}
