//go:build integration

package ipvswriter

import (
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	mobyipvs "github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// cluster is the plan of tests (a) to (e): every kind, scheduler flags,
// persistence, weights, UDP and IPv6. Destinations are test addresses
// that need not answer. Node address: 198.51.100.10 on node0.
func cluster() []policy.ServicePlan {
	web := svc("web",
		vs("ClusterIP 10.96.0.10:80/TCP", "10.244.1.2:8080", "10.244.2.2:8080*3"),
		vs("NodePort 198.51.100.10:30080/TCP", "10.244.1.2:8080", "10.244.2.2:8080*3"),
		vs("LoadBalancer 203.0.113.10:80/TCP", "10.244.1.2:8080", "10.244.2.2:8080*3"),
		vs("ExternalIP 192.0.2.10:80/TCP", "10.244.1.2:8080"))
	sticky := vs("ClusterIP 10.96.0.11:443/TCP", "10.244.1.3:8443")
	sticky.PersistenceTimeoutSeconds = 10800
	mh := vs("ClusterIP 10.96.0.12:80/TCP", "10.244.1.4:80*2", "10.244.2.4:80")
	mh.Scheduler, mh.SchedulerFlags = "mh", []string{"mh-fallback", "mh-port"}
	sh := vs("ClusterIP 10.96.0.13:80/TCP", "10.244.1.5:80")
	sh.Scheduler, sh.SchedulerFlags = "sh", []string{"sh-port"}
	dns := svc("dns", vs("ClusterIP 10.96.0.53:53/UDP", "10.244.1.6:53"), vs("ClusterIP 10.96.0.53:53/TCP", "10.244.1.6:53"))
	v6 := svc("v6", vs("ClusterIP [fd00:96::10]:80/TCP", "[fd00:244::2]:8080*5"))
	empty := svc("empty", vs("ClusterIP 10.96.0.14:80/TCP"))
	return []policy.ServicePlan{web, svc("sticky", sticky), svc("mh", mh), svc("sh", sh), dns, v6, empty}
}

// wantIPVS is cluster() as moby/ipvs reads it back: the kernel adds
// IP_VS_SVC_F_HASHED (0x2) to every service's flags.
const wantIPVS = `TCP 10.96.0.10:80 sched=rr flags=0x2 timeout=0 netmask=0xffffffff af=2
  -> 10.244.1.2:8080 fwd=0 weight=1
  -> 10.244.2.2:8080 fwd=0 weight=3
TCP 10.96.0.11:443 sched=rr flags=0x3 timeout=10800 netmask=0xffffffff af=2
  -> 10.244.1.3:8443 fwd=0 weight=1
TCP 10.96.0.12:80 sched=mh flags=0x1a timeout=0 netmask=0xffffffff af=2
  -> 10.244.1.4:80 fwd=0 weight=2
  -> 10.244.2.4:80 fwd=0 weight=1
TCP 10.96.0.13:80 sched=sh flags=0x12 timeout=0 netmask=0xffffffff af=2
  -> 10.244.1.5:80 fwd=0 weight=1
TCP 10.96.0.14:80 sched=rr flags=0x2 timeout=0 netmask=0xffffffff af=2
TCP 10.96.0.53:53 sched=rr flags=0x2 timeout=0 netmask=0xffffffff af=2
  -> 10.244.1.6:53 fwd=0 weight=1
TCP 192.0.2.10:80 sched=rr flags=0x2 timeout=0 netmask=0xffffffff af=2
  -> 10.244.1.2:8080 fwd=0 weight=1
TCP 198.51.100.10:30080 sched=rr flags=0x2 timeout=0 netmask=0xffffffff af=2
  -> 10.244.1.2:8080 fwd=0 weight=1
  -> 10.244.2.2:8080 fwd=0 weight=3
TCP 203.0.113.10:80 sched=rr flags=0x2 timeout=0 netmask=0xffffffff af=2
  -> 10.244.1.2:8080 fwd=0 weight=1
  -> 10.244.2.2:8080 fwd=0 weight=3
TCP [fd00:96::10]:80 sched=rr flags=0x2 timeout=0 netmask=0x80 af=10
  -> [fd00:244::2]:8080 fwd=0 weight=5
UDP 10.96.0.53:53 sched=rr flags=0x2 timeout=0 netmask=0xffffffff af=2
  -> 10.244.1.6:53 fwd=0 weight=1`

var wantAddrs = []string{"10.96.0.10/32", "10.96.0.11/32", "10.96.0.12/32", "10.96.0.13/32", "10.96.0.14/32",
	"10.96.0.53/32", "192.0.2.10/32", "203.0.113.10/32", "fd00:96::10/128"}

func checkState(t *testing.T, h *mobyipvs.Handle, extra string) {
	t.Helper()
	want := wantIPVS
	if extra != "" {
		want = extra + "\n" + want
	}
	if got := dumpIPVS(t, h); got != sortBlocks(want) {
		t.Errorf("IPVS state:\n%s\nwant:\n%s", got, sortBlocks(want))
	}
	if got := strings.Join(dummyAddrs(t), " "); got != strings.Join(wantAddrs, " ") {
		t.Errorf("%s addresses: %s\nwant %s", dummy, got, strings.Join(wantAddrs, " "))
	}
}

// sortBlocks sorts a dump's virtual server blocks as dumpIPVS does.
func sortBlocks(s string) string {
	var blocks []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "  ") {
			blocks[len(blocks)-1] += "\n" + l
		} else {
			blocks = append(blocks, l)
		}
	}
	sortStrings(blocks)
	return strings.Join(blocks, "\n")
}

// (a) Apply programs exactly the plan; (b) a new Writer with the same
// plan makes no change, whether it starts with Apply or Resync.
func TestApplyAndRestart(t *testing.T) {
	h := clean(t)
	nodeAddress(t, "198.51.100.10/24")
	w := newWriter(t, ipvs.Config{})
	if err := w.Apply(cluster()); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	t.Logf("first Apply ops: %v", w.Ops())
	checkState(t, h, "")
	l, err := netlink.LinkByName(dummy)
	if err != nil {
		t.Fatalf("%s: %v", dummy, err)
	}
	if l.Type() != "dummy" || l.Attrs().Flags&net.FlagUp != 0 {
		t.Errorf("%s is a %s link, flags %v; want a dummy left down, as kube-proxy", dummy, l.Type(), l.Attrs().Flags)
	}
	// Down as it is, its addresses are local: the kernel routes the VIPs
	// of both families to the host (table local, type local).
	// The kernel installs the IPv6 local route shortly after the address
	// is added (not synchronously): allow it a moment.
	for _, vip := range []string{"10.96.0.10", "fd00:96::10"} {
		var rs []netlink.Route
		var err error
		for try := 0; try < 50; try++ {
			if rs, err = netlink.RouteGet(net.ParseIP(vip)); err == nil && len(rs) == 1 && rs[0].Type == unix.RTN_LOCAL {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil || len(rs) != 1 || rs[0].Type != unix.RTN_LOCAL {
			t.Errorf("route to %s: %+v, %v; want one local route", vip, rs, err)
		}
	}
	for _, k := range []string{"net/ipv4/vs/conntrack", "net/ipv4/vs/expire_nodest_conn", "net/ipv4/vs/expire_quiescent_template", "net/ipv4/ip_forward"} {
		if b, _ := os.ReadFile("/proc/sys/" + k); strings.TrimSpace(string(b)) != "1" {
			t.Errorf("sysctl %s = %q, want 1", k, b)
		}
	}

	for _, tc := range []struct {
		name string
		run  func(w *ipvs.Writer) error
	}{
		{"restart with Resync", func(w *ipvs.Writer) error { return w.Resync(plan(cluster()...)) }},
		{"restart with Apply", func(w *ipvs.Writer) error { return w.Apply(cluster()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w2 := newWriter(t, ipvs.Config{})
			if err := tc.run(w2); err != nil {
				t.Fatal(err)
			}
			if ops := w2.Ops(); len(ops) != 0 {
				t.Errorf("restart made kernel changes: %v", ops)
			}
			checkState(t, h, "")
		})
	}
}

// (c) A virtual server deleted by hand comes back with Resync.
func TestResyncRestoresDeleted(t *testing.T) {
	h := clean(t)
	nodeAddress(t, "198.51.100.10/24")
	w := newWriter(t, ipvs.Config{})
	if err := w.Resync(plan(cluster()...)); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	if err := h.DelService(mobyService("10.96.0.10", 80, unix.IPPROTO_TCP)); err != nil {
		t.Fatalf("DelService: %v", err)
	}
	if err := h.DelService(mobyService("198.51.100.10", 30080, unix.IPPROTO_TCP)); err != nil {
		t.Fatalf("DelService: %v", err)
	}
	before := w.Ops()
	if err := w.Resync(plan(cluster()...)); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	after := w.Ops()
	if d := after["add-service"] - before["add-service"]; d != 2 {
		t.Errorf("Resync made %d add-service, want 2", d)
	}
	if d := after["add-destination"] - before["add-destination"]; d != 4 {
		t.Errorf("Resync made %d add-destination, want 4", d)
	}
	checkState(t, h, "")
}

// (d) A foreign virtual server survives Apply, Resync and Cleanup; (e)
// Cleanup removes our virtual servers and kube-ipvs0.
func TestForeignAndCleanup(t *testing.T) {
	h := clean(t)
	nodeAddress(t, "198.51.100.10/24")
	foreign := []*mobyipvs.Service{
		mobyService("192.0.2.77", 80, unix.IPPROTO_TCP),
		mobyService("198.51.100.10", 22, unix.IPPROTO_TCP), // node address, not a NodePort
	}
	for _, f := range foreign {
		f.SchedName = "wlc"
		if err := h.NewService(f); err != nil {
			t.Fatalf("NewService: %v", err)
		}
		d := &mobyipvs.Destination{Address: net.ParseIP("192.0.2.1").To4(), Port: 8080, Weight: 7, AddressFamily: unix.AF_INET}
		if err := h.NewDestination(f, d); err != nil {
			t.Fatalf("NewDestination: %v", err)
		}
	}
	foreignDump := "TCP 192.0.2.77:80 sched=wlc flags=0x2 timeout=0 netmask=0xffffffff af=2\n  -> 192.0.2.1:8080 fwd=0 weight=7\n" +
		"TCP 198.51.100.10:22 sched=wlc flags=0x2 timeout=0 netmask=0xffffffff af=2\n  -> 192.0.2.1:8080 fwd=0 weight=7"

	w := newWriter(t, ipvs.Config{})
	if err := w.Apply(cluster()); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	checkState(t, h, foreignDump)
	if err := w.Resync(plan(cluster()...)); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	checkState(t, h, foreignDump)
	if err := w.Resync(policy.Plan{}); err != nil {
		t.Fatalf("Resync(empty): %v", err)
	}
	if got := dumpIPVS(t, h); got != sortBlocks(foreignDump) {
		t.Errorf("after Resync(empty plan):\n%s\nwant only the foreign:\n%s", got, foreignDump)
	}
	if err := w.Apply(cluster()); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	// Cleanup from a fresh process: it reads the kernel. Without a plan it
	// cannot tell the NodePort virtual server on the node address from a
	// foreign one, so that one stays; the same Writer removes it.
	fresh := newWriter(t, ipvs.Config{})
	if err := fresh.Cleanup(); err != nil {
		t.Fatalf("Cleanup (fresh): %v", err)
	}
	if _, err := netlink.LinkByName(dummy); err == nil {
		t.Errorf("%s still exists after Cleanup", dummy)
	}
	want := foreignDump + "\nTCP 198.51.100.10:30080 sched=rr flags=0x2 timeout=0 netmask=0xffffffff af=2\n" +
		"  -> 10.244.1.2:8080 fwd=0 weight=1\n  -> 10.244.2.2:8080 fwd=0 weight=3"
	if got := dumpIPVS(t, h); got != sortBlocks(want) {
		t.Errorf("after Cleanup (fresh):\n%s\nwant:\n%s", got, sortBlocks(want))
	}
	if err := w.Cleanup(); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	if got := dumpIPVS(t, h); got != sortBlocks(foreignDump) {
		t.Errorf("after Cleanup:\n%s\nwant only the foreign:\n%s", got, foreignDump)
	}
	if l, err := netlink.LinkByName("node0"); err != nil || l == nil {
		t.Errorf("node0 touched by Cleanup: %v", err)
	}
	// A second Cleanup finds nothing to do and no error.
	if err := newWriter(t, ipvs.Config{}).Cleanup(); err != nil {
		t.Errorf("second Cleanup: %v", err)
	}
}

// TestKernelErrors records the errors the kernel returns, which the
// fakes (proxier/ipvs/fake.go) reproduce.
func TestKernelErrors(t *testing.T) {
	h := clean(t)
	s := mobyService("10.96.0.99", 80, unix.IPPROTO_TCP)
	d := &mobyipvs.Destination{Address: net.ParseIP("10.244.9.9").To4(), Port: 80, Weight: 1, AddressFamily: unix.AF_INET}
	check := func(what string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("%s: got %v, want %v", what, err, want)
		} else {
			t.Logf("%s: %v (%d)", what, err, err.(syscall.Errno))
		}
	}
	check("update missing service", h.UpdateService(s), unix.ESRCH)
	check("delete missing service", h.DelService(s), unix.ESRCH)
	check("add destination to missing service", h.NewDestination(s, d), unix.ESRCH)
	ds, err := h.GetDestinations(s)
	if err != nil || len(ds) != 0 {
		t.Errorf("destinations of a missing service: %v, %v; want none, no error", ds, err)
	}
	bad := *s
	bad.SchedName = "nope"
	check("unknown scheduler", h.NewService(&bad), unix.ENOENT)
	if err := h.NewService(s); err != nil {
		t.Fatal(err)
	}
	check("duplicate service", h.NewService(s), unix.EEXIST)
	check("update missing destination", h.UpdateDestination(s, d), unix.ENOENT)
	check("delete missing destination", h.DelDestination(s, d), unix.ENOENT)
	if err := h.NewDestination(s, d); err != nil {
		t.Fatal(err)
	}
	check("duplicate destination", h.NewDestination(s, d), unix.EEXIST)

	dl := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: dummy}}
	if err := netlink.LinkAdd(dl); err != nil {
		t.Fatal(err)
	}
	check("duplicate link", netlink.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: dummy}}), unix.EEXIST)
	a := &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP("10.96.0.99").To4(), Mask: net.CIDRMask(32, 32)}}
	check("delete missing address", netlink.AddrDel(dl, a), unix.EADDRNOTAVAIL)
	if err := netlink.AddrAdd(dl, a); err != nil {
		t.Fatal(err)
	}
	check("duplicate address", netlink.AddrAdd(dl, a), unix.EEXIST)
	a6 := &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP("fd00::99"), Mask: net.CIDRMask(128, 128)}}
	check("delete missing IPv6 address", netlink.AddrDel(dl, a6), unix.EADDRNOTAVAIL)
	_, err = netlink.LinkByName("nope0")
	var nf netlink.LinkNotFoundError
	if !errors.As(err, &nf) {
		t.Errorf("missing link: %T %v", err, err)
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// Sysctls (StrictARP) and IPVS timeouts are set on the first sync, and a
// restarted Writer finds nothing to change.
func TestSysctlsAndTimeouts(t *testing.T) {
	h := clean(t)
	orig, err := h.GetConfig()
	if err != nil {
		t.Fatalf("GetConfig: %v", err)
	}
	t.Logf("kernel IPVS timeouts: tcp %s tcpfin %s udp %s", orig.TimeoutTCP, orig.TimeoutTCPFin, orig.TimeoutUDP)
	t.Cleanup(func() { _ = h.SetConfig(orig) })
	cfg := ipvs.Config{StrictARP: true, TCPTimeout: 3600 * time.Second, UDPTimeout: 45 * time.Second}
	w := newWriter(t, cfg)
	if err := w.Apply(nil); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	t.Logf("ops: %v", w.Ops())
	for k, v := range map[string]string{"net/ipv4/conf/all/arp_ignore": "1", "net/ipv4/conf/all/arp_announce": "2", "net/ipv4/vs/conntrack": "1"} {
		if b, _ := os.ReadFile("/proc/sys/" + k); strings.TrimSpace(string(b)) != v {
			t.Errorf("sysctl %s = %q, want %s", k, b, v)
		}
	}
	got, err := h.GetConfig()
	if err != nil {
		t.Fatalf("GetConfig: %v", err)
	}
	if got.TimeoutTCP != time.Hour || got.TimeoutUDP != 45*time.Second || got.TimeoutTCPFin != orig.TimeoutTCPFin {
		t.Errorf("timeouts tcp %s tcpfin %s udp %s, want 1h, unchanged %s, 45s", got.TimeoutTCP, got.TimeoutTCPFin, got.TimeoutUDP, orig.TimeoutTCPFin)
	}
	w2 := newWriter(t, cfg)
	if err := w2.Apply(nil); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if ops := w2.Ops(); len(ops) != 0 {
		t.Errorf("restart made changes: %v", ops)
	}
}
