package ipvs

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// addForeign adds virtual servers that are not ours: one on an address
// of no interface of ours, one on the node address with a port that is
// not a NodePort of the plan (192.168.1.10:30080 is).
func addForeign(t *testing.T, e *env) {
	t.Helper()
	for _, k := range []string{"192.0.2.77:80/TCP", "192.168.1.10:22/TCP", "192.168.1.10:30080/UDP"} {
		must(t, e.k.AddVirtualServer(VirtualServer{Key: key(k), Scheduler: "wlc"}))
		must(t, e.k.AddDestination(key(k), Destination{Addr: netip.MustParseAddr("192.0.2.1"), Port: 80, Weight: 1}))
	}
}

func TestForeignUntouched(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(e *env) error
	}{
		{"apply", func(e *env) error { return e.apply(web("10.244.1.5:8080")) }},
		{"resync", func(e *env) error { return e.resync(plan(web("10.244.1.5:8080"))) }},
		{"resync with empty plan", func(e *env) error {
			if err := e.resync(plan(web("10.244.1.5:8080"))); err != nil {
				return err
			}
			return e.resync(policy.Plan{})
		}},
		{"remove service", func(e *env) error {
			if err := e.apply(web("10.244.1.5:8080")); err != nil {
				return err
			}
			return e.apply(svc("web"))
		}},
		{"cleanup", func(e *env) error {
			if err := e.resync(plan(web("10.244.1.5:8080"))); err != nil {
				return err
			}
			return e.w.Cleanup()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			addForeign(t, e)
			if err := tc.run(e); err != nil {
				t.Fatal(err)
			}
			for _, tr := range e.trace {
				for _, f := range []string{"192.0.2.77:80/TCP", "192.168.1.10:22/TCP", "192.168.1.10:30080/UDP", "eth0"} {
					if containsWord(tr, f) {
						t.Errorf("touched foreign %s: %s", f, tr)
					}
				}
			}
			vss, _ := e.k.VirtualServers()
			n := 0
			for _, v := range vss {
				if v.Scheduler == "wlc" {
					n++
				}
			}
			if n != 3 {
				t.Errorf("%d foreign virtual servers left, want 3:\n%s", n, e.k.Dump())
			}
		})
	}
}

func containsWord(s, w string) bool {
	for _, f := range splitFields(s) {
		if f == w {
			return true
		}
	}
	return false
}

func splitFields(s string) []string {
	var out []string
	start := -1
	for i, r := range s + " " {
		if r == ' ' {
			if start >= 0 {
				out = append(out, s[start:i])
			}
			start = -1
		} else if start < 0 {
			start = i
		}
	}
	return out
}

func TestExcludeCIDRs(t *testing.T) {
	cfg := Config{ExcludeCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.100.0/24")}}
	excluded := svc("ex", vs("ClusterIP 10.96.100.1:80/TCP", "10.244.1.5:80"))
	for _, tc := range []struct {
		name string
		run  func(e *env) error
	}{
		{"service removed", func(e *env) error { return e.apply(svc("ex")) }},
		{"stale on resync", func(e *env) error { return e.resync(policy.Plan{}) }},
		{"cleanup", func(e *env) error { return e.w.Cleanup() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, cfg)
			e.mustApply(excluded, one("10.244.1.5:80"))
			if err := tc.run(e); err != nil {
				t.Fatal(err)
			}
			vss, _ := e.k.VirtualServers()
			found := false
			for _, v := range vss {
				found = found || v.Key == key("10.96.100.1:80/TCP")
			}
			if !found {
				t.Errorf("excluded virtual server deleted:\n%s", e.k.Dump())
			}
		})
	}
	t.Run("still programmed when planned", func(t *testing.T) {
		e := newEnv(t, cfg)
		e.mustApply(excluded)
		if d := destLine(&env{k: e.k}, "10.244.1.5:80"); d == "" {
			t.Errorf("excluded planned virtual server not programmed:\n%s", e.k.Dump())
		}
	})
}

// TestNodePortOwnershipByExactKey: a virtual server on a node address is
// ours only by its exact key (address, protocol, port). One whose port is
// our NodePort only on another node address, or only in the other
// family, is foreign and survives Resync and Cleanup.
func TestNodePortOwnershipByExactKey(t *testing.T) {
	for _, tc := range []struct {
		name, foreign string
		planned       []string // our NodePort virtual servers
	}{
		{"our port on another address", "192.168.1.11:30080/TCP",
			[]string{"NodePort 192.168.1.10:30080/TCP", "NodePort 192.168.1.11:30081/TCP"}},
		{"our port in the other family", "[fd00:1::10]:30080/TCP",
			[]string{"NodePort 192.168.1.10:30080/TCP", "NodePort [fd00:1::10]:30081/TCP"}},
		{"our port in the other protocol", "192.168.1.10:30080/UDP",
			[]string{"NodePort 192.168.1.10:30080/TCP"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			must(t, e.k.AddVirtualServer(VirtualServer{Key: key(tc.foreign), Scheduler: "wlc"}))
			var vss []policy.VirtualServer
			for _, spec := range tc.planned {
				d := "10.244.1.5:8080"
				if strings.Contains(spec, "[") {
					d = "[fd00:244::5]:8080"
				}
				vss = append(vss, vs(spec, d))
			}
			sp := svc("np", vss...)
			for _, step := range []struct {
				what string
				run  func() error
			}{
				{"Apply", func() error { return e.apply(sp) }},
				{"Resync", func() error { return e.resync(plan(sp)) }},
				{"Apply (removed)", func() error { return e.apply(svc("np")) }},
				{"Cleanup", e.w.Cleanup},
			} {
				if err := step.run(); err != nil {
					t.Fatalf("%s: %v", step.what, err)
				}
				if !slices.ContainsFunc(kernelVSs(t, e), func(v VirtualServer) bool { return v.Key == key(tc.foreign) }) {
					t.Fatalf("after %s the foreign %s is gone:\n%s", step.what, tc.foreign, e.k.Dump())
				}
			}
			vssLeft := kernelVSs(t, e)
			if len(vssLeft) != 1 || vssLeft[0].Key != key(tc.foreign) {
				t.Errorf("after Cleanup:\n%s\nwant only the foreign %s", e.k.Dump(), tc.foreign)
			}
		})
	}
}

// TestAdoptRecorded: a fresh Writer (a restarted proxy, --cleanup) that
// is told which NodePort virtual servers an earlier run recorded deletes
// those the plan does not want, and nothing else on the node address.
func TestAdoptRecorded(t *testing.T) {
	nodePort := key("192.168.1.10:30080/TCP")
	foreign := []Key{key("192.0.2.77:80/TCP"), key("192.168.1.10:22/TCP"), key("192.168.1.10:30080/UDP")}
	for _, tc := range []struct {
		name     string
		cfg      Config
		recorded []Key
		run      func(e *env) error
		wantKept bool // the earlier run's NodePort virtual server stays
	}{
		{name: "cleanup deletes the recorded NodePort", recorded: []Key{nodePort},
			run: func(e *env) error { return e.w.Cleanup() }},
		{name: "cleanup without a record leaves it", wantKept: true,
			run: func(e *env) error { return e.w.Cleanup() }},
		{name: "resync of a plan without it deletes the recorded NodePort", recorded: []Key{nodePort},
			run: func(e *env) error { return e.resync(plan(dns("10.244.1.7:53"))) }},
		{name: "resync without a record leaves it", wantKept: true,
			run: func(e *env) error { return e.resync(plan(dns("10.244.1.7:53"))) }},
		{name: "a recorded NodePort still planned is kept, unchanged", recorded: []Key{nodePort}, wantKept: true,
			run: func(e *env) error {
				var err error
				if d := e.opsDelta(func() { err = e.resync(plan(web("10.244.1.5:8080"))) }); len(d) != 0 {
					return fmt.Errorf("resync of the same plan made changes: %v", d)
				}
				return err
			}},
		{name: "a recorded NodePort on an excluded address is kept", recorded: []Key{nodePort}, wantKept: true,
			cfg: Config{ExcludeCIDRs: []netip.Prefix{netip.MustParsePrefix("192.168.1.10/32")}},
			run: func(e *env) error { return e.w.Cleanup() }},
		{name: "recorded keys missing from the kernel are ignored", recorded: []Key{nodePort, key("192.168.1.10:31000/TCP")},
			run: func(e *env) error { return e.w.Cleanup() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.cfg)
			addForeign(t, e)
			e.mustResync(plan(web("10.244.1.5:8080")))
			e.restart()
			e.w.AdoptRecorded(tc.recorded)
			if err := tc.run(e); err != nil {
				t.Fatal(err)
			}
			vss, err := e.k.VirtualServers()
			if err != nil {
				t.Fatal(err)
			}
			have := map[Key]bool{}
			for _, v := range vss {
				have[v.Key] = true
			}
			if have[nodePort] != tc.wantKept {
				t.Errorf("%s kept %t, want %t:\n%s", nodePort, have[nodePort], tc.wantKept, e.k.Dump())
			}
			for _, k := range foreign {
				if !have[k] {
					t.Errorf("foreign %s deleted:\n%s", k, e.k.Dump())
				}
			}
			for _, tr := range e.trace {
				for _, k := range foreign {
					if containsWord(tr, k.String()) {
						t.Errorf("touched foreign %s: %s", k, tr)
					}
				}
			}
		})
	}
}

// kernelVSs lists the fake kernel's virtual servers.
func kernelVSs(t *testing.T, e *env) []VirtualServer {
	t.Helper()
	vss, err := e.k.VirtualServers()
	if err != nil {
		t.Fatal(err)
	}
	return vss
}
