package ipvs

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/golden"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

func one(dests ...string) policy.ServicePlan {
	return svc("one", vs("ClusterIP 10.96.0.10:80/TCP", dests...))
}

// destLine returns the fake's line for a destination of 10.96.0.10:80/TCP,
// or "" when it is gone.
func destLine(e *env, d string) string {
	for _, l := range strings.Split(e.k.Dump(), "\n") {
		if strings.HasPrefix(l, "  -> "+d+" ") {
			return strings.TrimPrefix(l, "  -> ")
		}
	}
	return ""
}

func TestGracefulDrain(t *testing.T) {
	k, a, b := key("10.96.0.10:80/TCP"), dest("10.244.1.5:80"), dest("10.244.1.6:80")
	for _, tc := range []struct {
		name string
		// after removing b (2 active, 1 inactive connections), act, then
		// check b's line.
		act  func(t *testing.T, e *env)
		want string
	}{
		{"weight 0 while connections live", func(t *testing.T, e *env) {
			e.advance(time.Minute)
			e.mustApply()
		}, "10.244.1.6:80 masq weight=0 active=2 inactive=1"},
		{"deleted when connections reach 0", func(t *testing.T, e *env) {
			must(t, e.k.SetConns(k, b, 0, 0))
			e.mustApply()
		}, ""},
		{"inactive connections keep it", func(t *testing.T, e *env) {
			must(t, e.k.SetConns(k, b, 0, 1))
			e.mustApply()
		}, "10.244.1.6:80 masq weight=0 active=0 inactive=1"},
		{"deleted after the graceful period", func(t *testing.T, e *env) {
			e.advance(10 * time.Minute)
			e.mustApply()
		}, ""},
		{"kept just before the graceful period", func(t *testing.T, e *env) {
			e.advance(10*time.Minute - time.Second)
			e.mustApply()
		}, "10.244.1.6:80 masq weight=0 active=2 inactive=1"},
		{"checked by Resync too", func(t *testing.T, e *env) {
			must(t, e.k.SetConns(k, b, 0, 0))
			e.mustResync(plan(one("10.244.1.5:80")))
		}, ""},
		{"comeback restores the plan weight", func(t *testing.T, e *env) {
			e.mustApply(one("10.244.1.5:80", "10.244.1.6:80*5"))
		}, "10.244.1.6:80 masq weight=5 active=2 inactive=1"},
		{"a restarted writer keeps draining it", func(t *testing.T, e *env) {
			e.restart()
			e.mustResync(plan(one("10.244.1.5:80")))
			if got := destLine(e, "10.244.1.6:80"); got == "" {
				t.Fatalf("deleted at restart")
			}
			must(t, e.k.SetConns(k, b, 0, 0))
			e.mustApply()
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{GracefulPeriod: 10 * time.Minute})
			e.mustApply(one("10.244.1.5:80", "10.244.1.6:80"))
			must(t, e.k.SetConns(k, a, 1, 0))
			must(t, e.k.SetConns(k, b, 2, 1))
			d := e.opsDelta(func() { e.mustApply(one("10.244.1.5:80")) })
			if diff := cmp.Diff(map[string]int{"update-destination": 1}, d); diff != "" {
				t.Fatalf("removing a busy destination (-want +got):\n%s", diff)
			}
			if got, want := destLine(e, "10.244.1.6:80"), "10.244.1.6:80 masq weight=0 active=2 inactive=1"; got != want {
				t.Fatalf("after removal: %q, want %q", got, want)
			}
			if e.w.Draining() != 1 {
				t.Fatalf("Draining() = %d, want 1", e.w.Draining())
			}
			tc.act(t, e)
			if got := destLine(e, "10.244.1.6:80"); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			wantDraining := 0
			if strings.Contains(tc.want, "weight=0") {
				wantDraining = 1
			}
			if e.w.Draining() != wantDraining {
				t.Errorf("Draining() = %d, want %d", e.w.Draining(), wantDraining)
			}
			if got := destLine(e, "10.244.1.5:80"); got != "10.244.1.5:80 masq weight=1 active=1 inactive=0" {
				t.Errorf("the kept destination changed: %q", got)
			}
		})
	}
}

// TestDrainVirtualServerRemoved: when the whole virtual server leaves the
// plan it is deleted, draining destinations and all (as kube-proxy).
func TestDrainVirtualServerRemoved(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustApply(one("10.244.1.5:80", "10.244.1.6:80"))
	must(t, e.k.SetConns(key("10.96.0.10:80/TCP"), dest("10.244.1.6:80"), 3, 0))
	e.mustApply(one("10.244.1.5:80"))
	e.mustApply(svc("one"))
	if e.k.Dump() != "" || e.w.Draining() != 0 {
		t.Errorf("virtual server left:\n%s draining %d", e.k.Dump(), e.w.Draining())
	}
}

// TestUDPDestinationDeletedAtOnce: a removed UDP destination is deleted
// at once, even with connections, where a TCP one drains. Its conntrack
// entries are package proxier/udpflows's to delete, after the sync: the
// Writer has no conntrack handle.
func TestUDPDestinationDeletedAtOnce(t *testing.T) {
	e := newEnv(t, Config{})
	udp := func(dests ...string) policy.ServicePlan {
		return svc("dns", vs("ClusterIP 10.96.0.53:53/UDP", dests...), vs("ClusterIP 10.96.0.53:53/TCP", dests...))
	}
	e.mustApply(udp("10.244.1.5:53", "10.244.1.6:53"))
	for _, k := range []string{"10.96.0.53:53/UDP", "10.96.0.53:53/TCP"} {
		must(t, e.k.SetConns(key(k), dest("10.244.1.6:53"), 0, 4))
	}
	e.mustApply(udp("10.244.1.5:53"))
	golden.Check(t, "testdata/udp-removal.golden", e.dump()+"changes:\n  "+strings.Join(e.trace, "\n  ")+"\n")
	if e.w.Draining() != 1 { // the TCP one
		t.Errorf("Draining() = %d, want 1", e.w.Draining())
	}
}
