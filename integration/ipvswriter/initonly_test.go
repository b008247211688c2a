//go:build integration

package ipvswriter

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	mobyipvs "github.com/moby/ipvs"
	"github.com/vishvananda/netlink"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// TestSchedulerCheckAsKubeProxy: on the real kernel, the start's
// scheduler check passes every scheduler the kernel has (loading its
// module: "mh" is loaded at boot, "sed" is not; not "nq", which
// integration/traffic, run in the same boot, needs never loaded), "none"
// without a module,
// and refuses one it lacks ("twos" before 6.2, a made-up name) naming its
// module; no probe virtual server is left either way.
func TestSchedulerCheckAsKubeProxy(t *testing.T) {
	h := clean(t)
	w := newWriter(t, ipvs.Config{})
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	var major, minor int
	_, _ = fmtSscan(strings.TrimSpace(string(b)), &major, &minor)
	hasTwos := major > 6 || major == 6 && minor >= 2
	for _, tc := range []struct {
		scheduler string
		ok        bool
	}{
		{"", true}, {"rr", true}, {"mh", true}, {"sed", true}, {"none", true},
		{"twos", hasTwos}, {"nope", false},
	} {
		t.Run(tc.scheduler, func(t *testing.T) {
			err := w.CheckScheduler(tc.scheduler)
			switch {
			case tc.ok && err != nil:
				t.Errorf("CheckScheduler(%q): %v", tc.scheduler, err)
			case !tc.ok && (err == nil || !strings.Contains(err.Error(), "module ip_vs_"+tc.scheduler) || !errors.Is(err, syscall.ENOENT)):
				t.Errorf("CheckScheduler(%q): %v, want ENOENT naming module ip_vs_%s", tc.scheduler, err, tc.scheduler)
			}
			if d := dumpIPVS(t, h); d != "" {
				t.Errorf("IPVS after the check:\n%s\nwant empty", d)
			}
		})
	}
}

// TestTuneIsInitOnly: what --init-only does on the IPVS side, on the real
// kernel: kube-proxy's IPVS sysctls (strict ARP's too) and the IPVS
// timeouts, and nothing else (no virtual server, no dummy interface).
func TestTuneIsInitOnly(t *testing.T) {
	h := clean(t)
	sysctls := map[string]string{
		"net/ipv4/vs/conntrack": "1", "net/ipv4/vs/expire_nodest_conn": "1", "net/ipv4/vs/expire_quiescent_template": "1",
		"net/ipv4/ip_forward": "1", "net/ipv4/conf/all/arp_ignore": "1", "net/ipv4/conf/all/arp_announce": "2",
	}
	for k := range sysctls { // start from the kernel's defaults
		if err := os.WriteFile("/proc/sys/"+k, []byte("0"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	defaults := &mobyipvs.Config{TimeoutTCP: 900 * time.Second, TimeoutTCPFin: 120 * time.Second, TimeoutUDP: 300 * time.Second}
	t.Cleanup(func() { _ = h.SetConfig(defaults) })
	w := newWriter(t, ipvs.Config{StrictARP: true, TCPTimeout: 901 * time.Second, TCPFinTimeout: 121 * time.Second, UDPTimeout: 31 * time.Second})
	if err := w.Tune(); err != nil {
		t.Fatalf("Tune: %v", err)
	}
	for k, want := range sysctls {
		if b, _ := os.ReadFile("/proc/sys/" + k); strings.TrimSpace(string(b)) != want {
			t.Errorf("sysctl %s = %q, want %s", k, b, want)
		}
	}
	c, err := h.GetConfig()
	if err != nil {
		t.Fatal(err)
	}
	if c.TimeoutTCP != 901*time.Second || c.TimeoutTCPFin != 121*time.Second || c.TimeoutUDP != 31*time.Second {
		t.Errorf("IPVS timeouts %v %v %v, want 901s 121s 31s", c.TimeoutTCP, c.TimeoutTCPFin, c.TimeoutUDP)
	}
	if d := dumpIPVS(t, h); d != "" {
		t.Errorf("IPVS after Tune:\n%s\nwant empty", d)
	}
	if _, err := netlink.LinkByName(dummy); err == nil {
		t.Errorf("Tune made %s", dummy)
	}
}
