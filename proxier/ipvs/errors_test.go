package ipvs

import (
	"errors"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/golden"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// TestErrorIsolation: a failed operation on one virtual server is
// returned, wrapped with it, as its service's *ServiceError; it neither
// blocks nor undoes the others, and asks for no full resync.
func TestErrorIsolation(t *testing.T) {
	for _, tc := range []struct {
		name, op, target, wantErr string
	}{
		{"add virtual server", "add-service", "10.96.0.53:53/UDP",
			"add virtual server 10.96.0.53:53/UDP: cannot allocate memory"},
		{"add destination", "add-destination", "10.96.0.53:53/UDP 10.244.1.7:53",
			"add destination 10.244.1.7:53 of virtual server 10.96.0.53:53/UDP: cannot allocate memory"},
		{"add address", "add-address", "kube-ipvs0 10.96.0.53/32",
			"add address 10.96.0.53/32 to kube-ipvs0: cannot allocate memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.fault(tc.op, tc.target, syscall.ENOMEM)
			err := e.apply(web("10.244.1.5:8080"), dns("10.244.1.7:53"))
			if err == nil || err.Error() != tc.wantErr || !errors.Is(err, syscall.ENOMEM) {
				t.Fatalf("Apply error %q, want %q wrapping ENOMEM", err, tc.wantErr)
			}
			// The failure is the service's alone: no full resync.
			svcErrs, rest := SplitErrors(err)
			if len(svcErrs) != 1 || svcErrs[0].Service != (policy.ServiceKey{Namespace: "default", Name: "dns"}) ||
				svcErrs[0].Reason != ReasonKernelError || rest != nil {
				t.Errorf("SplitErrors: %v, rest %v; want one KernelError of default/dns", svcErrs, rest)
			}
			if e.w.NeedsResync() {
				t.Errorf("NeedsResync true after one service's failure")
			}
			if got, want := e.w.NextRetry(), e.now.Add(time.Second); !got.Equal(want) {
				t.Errorf("NextRetry %v, want %v", got, want)
			}
			golden.Check(t, "testdata/isolation-"+strings.ReplaceAll(tc.name, " ", "-")+".golden", e.dump())
			// Once the fault is gone, the next Apply after the backoff
			// completes the failed service and touches nothing else.
			e.fault("", "", nil)
			e.advance(time.Second)
			e.mustApply()
			for _, tr := range e.trace {
				if !strings.Contains(tr, "10.96.0.53") {
					t.Errorf("retry touched another service: %s", tr)
				}
			}
			full := newEnv(t, Config{})
			full.mustApply(web("10.244.1.5:8080"), dns("10.244.1.7:53"))
			if diff := cmp.Diff(full.dump(), e.dump()); diff != "" {
				t.Errorf("after the retry (-want +got):\n%s", diff)
			}
			if err := e.resync(plan(web("10.244.1.5:8080"), dns("10.244.1.7:53"))); err != nil || e.w.NeedsResync() {
				t.Errorf("Resync: %v, NeedsResync %v", err, e.w.NeedsResync())
			}
		})
	}
}

// TestRetryBackoff: a failing service is retried by later Applies after
// 1 s, 2 s, 4 s, ... at most 2 min; other Applies leave it alone.
func TestRetryBackoff(t *testing.T) {
	e := newEnv(t, Config{})
	e.fault("add-service", "10.96.0.53:53/UDP", syscall.ENOMEM)
	if err := e.apply(dns("10.244.1.7:53")); err == nil {
		t.Fatal("no error")
	}
	attempts := func() int { return e.w.Ops()["error"] }
	var got []time.Duration
	start := e.now
	for range 10000 {
		e.advance(250 * time.Millisecond)
		before := attempts()
		_ = e.apply()
		if attempts() > before {
			got = append(got, e.now.Sub(start))
			start = e.now
		}
		if len(got) == 10 {
			break
		}
	}
	want := []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
		32 * time.Second, 64 * time.Second, 2 * time.Minute, 2 * time.Minute, 2 * time.Minute}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("retry intervals (-want +got):\n%s", diff)
	}
	// A change of the service is applied at once, whatever the backoff.
	e.fault("", "", nil)
	e.mustApply(dns("10.244.1.8:53"))
	if !strings.Contains(e.k.Dump(), "UDP 10.96.0.53:53") {
		t.Errorf("change not applied:\n%s", e.k.Dump())
	}
}

// TestDeleteFailureRetried: a service whose removal failed is retried.
func TestDeleteFailureRetried(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustApply(dns("10.244.1.7:53"))
	e.fault("delete-service", "10.96.0.53:53/UDP", syscall.EBUSY)
	if err := e.apply(svc("dns")); err == nil || !strings.Contains(err.Error(), "delete virtual server 10.96.0.53:53/UDP") {
		t.Fatalf("Apply error %v", err)
	}
	e.fault("", "", nil)
	e.advance(time.Second)
	e.mustApply()
	if e.k.Dump() != "" {
		t.Errorf("not deleted on retry:\n%s", e.k.Dump())
	}
}

func TestConflict(t *testing.T) {
	e := newEnv(t, Config{})
	a := svc("a", vs("ExternalIP 198.51.100.1:80/TCP", "10.244.1.1:80"))
	b := svc("b", vs("ExternalIP 198.51.100.1:80/TCP", "10.244.2.2:80"), vs("ClusterIP 10.96.0.2:80/TCP", "10.244.2.2:80"))
	e.mustApply(a)
	err := e.apply(b)
	want := "virtual server 198.51.100.1:80/TCP of service default/b: already claimed by service default/a"
	if err == nil || err.Error() != want {
		t.Fatalf("Apply error %q, want %q", err, want)
	}
	golden.Check(t, "testdata/conflict.golden", e.dump())
	// When a lets go, b gets it on its retry.
	e.mustApply(svc("a"))
	e.advance(time.Second)
	e.mustApply()
	if destLine(e, "10.244.2.2:80") == "" || strings.Contains(e.k.Dump(), "10.244.1.1:80") {
		t.Errorf("b did not take over:\n%s", e.k.Dump())
	}
}

func TestKernelReadFailure(t *testing.T) {
	e := newEnv(t, Config{})
	e.fault("list-services", "", syscall.EPERM)
	if err := e.apply(dns("10.244.1.7:53")); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("Apply error %v, want EPERM", err)
	}
	e.fault("", "", nil)
	e.advance(time.Second)
	e.mustApply()
	if !strings.Contains(e.k.Dump(), "UDP 10.96.0.53:53") {
		t.Errorf("the plan was lost:\n%s", e.k.Dump())
	}
}

func TestSysctlsAndTimeouts(t *testing.T) {
	cfg := Config{StrictARP: true, TCPTimeout: 3600 * time.Second, UDPTimeout: 60 * time.Second}
	e := newEnv(t, cfg)
	must(t, e.sys.Set("net/ipv4/ip_forward", "1"))
	e.mustApply()
	got := e.sys.Dump() + e.k.Dump() + "ops " + opsString(e.w.Ops()) + "\n"
	golden.Check(t, "testdata/sysctls.golden", got)
	e.restart()
	if d := e.opsDelta(func() { e.mustApply() }); len(d) != 0 {
		t.Errorf("restart changed %v", d)
	}
	t.Run("failure is retried", func(t *testing.T) {
		e := newEnv(t, Config{})
		e.fault("set-sysctl", "net/ipv4/vs/conntrack", syscall.EROFS)
		if err := e.apply(); err == nil || !strings.Contains(err.Error(), "set sysctl net/ipv4/vs/conntrack=1") {
			t.Fatalf("Apply error %v", err)
		}
		e.fault("", "", nil)
		if d := e.opsDelta(func() { e.mustApply() }); len(d) != 0 {
			t.Errorf("Apply retried the sysctls: %v", d)
		}
		if d := e.opsDelta(func() { e.mustResync(policy.Plan{}) }); !cmp.Equal(d, map[string]int{"set-sysctl": 1}) {
			t.Errorf("Resync retry made %v", d)
		}
	})
}

// TestAlreadyGone: deleting what someone else already deleted is done,
// not an error.
func TestAlreadyGone(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustApply(web("10.244.1.5:8080", "10.244.2.5:8080"))
	must(t, e.k.DeleteVirtualServer(key("203.0.113.10:80/TCP")))
	must(t, e.l.DelAddr("kube-ipvs0", netip.MustParsePrefix("203.0.113.10/32")))
	must(t, e.k.DeleteDestination(key("10.96.0.10:80/TCP"), Destination{Addr: netip.MustParseAddr("10.244.2.5"), Port: 8080}))
	e.mustApply(web("10.244.1.5:8080"))
	e.mustApply(svc("web"))
	if e.k.Dump() != "" || e.w.NeedsResync() {
		t.Errorf("left:\n%s NeedsResync %v", e.k.Dump(), e.w.NeedsResync())
	}
}
