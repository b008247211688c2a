//go:build integration

package ipvswriter

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/plantest"

	mobyipvs "github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// Plan builders shared with the other writer tests.
var (
	svc  = plantest.Service
	vs   = plantest.VirtualServer
	plan = plantest.Plan
)

const dummy = "kube-ipvs0"

// clean removes every IPVS virtual server and the links the tests make,
// now and when the test ends, so tests in one boot stay independent.
func clean(t *testing.T) *mobyipvs.Handle {
	t.Helper()
	h, err := mobyipvs.New("")
	if err != nil {
		t.Fatalf("ipvs.New: %v", err)
	}
	wipe := func() {
		_ = h.Flush()
		for _, name := range []string{dummy, "node0"} {
			if l, err := netlink.LinkByName(name); err == nil {
				_ = netlink.LinkDel(l)
			}
		}
	}
	wipe()
	t.Cleanup(func() { wipe(); h.Close() })
	return h
}

func newWriter(t *testing.T, cfg ipvs.Config) *ipvs.Writer {
	t.Helper()
	w, err := ipvs.NewLinux(cfg)
	if err != nil {
		t.Fatalf("NewLinux: %v", err)
	}
	t.Cleanup(w.Close)
	return w
}

// nodeAddress puts a "node address" on dummy node0.
func nodeAddress(t *testing.T, prefix string) {
	t.Helper()
	labnet.Dummy(t, "node0", prefix)
}

// dumpIPVS renders the kernel's IPVS state as read by moby/ipvs, sorted,
// raw flags included.
func dumpIPVS(t *testing.T, h *mobyipvs.Handle) string {
	t.Helper()
	svcs, err := h.GetServices()
	if err != nil {
		t.Fatalf("GetServices: %v", err)
	}
	var lines []string
	for _, s := range svcs {
		ds, err := h.GetDestinations(s)
		if err != nil {
			t.Fatalf("GetDestinations: %v", err)
		}
		line := fmt.Sprintf("%s %s sched=%s flags=%#x timeout=%d netmask=%#x af=%d", protoName(s.Protocol),
			net.JoinHostPort(s.Address.String(), strconv.Itoa(int(s.Port))), s.SchedName, s.Flags, s.Timeout, s.Netmask, s.AddressFamily)
		var dl []string
		for _, d := range ds {
			dl = append(dl, fmt.Sprintf("\n  -> %s fwd=%d weight=%d",
				net.JoinHostPort(d.Address.String(), strconv.Itoa(int(d.Port))), d.ConnectionFlags&mobyipvs.ConnectionFlagFwdMask, d.Weight))
		}
		slices.Sort(dl)
		lines = append(lines, line+strings.Join(dl, ""))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func protoName(p uint16) string {
	switch p {
	case unix.IPPROTO_TCP:
		return "TCP"
	case unix.IPPROTO_UDP:
		return "UDP"
	case unix.IPPROTO_SCTP:
		return "SCTP"
	}
	return strconv.Itoa(int(p))
}

// dummyAddrs lists kube-ipvs0's addresses; nil if it does not exist.
func dummyAddrs(t *testing.T) []string {
	t.Helper()
	l, err := netlink.LinkByName(dummy)
	if err != nil {
		return nil
	}
	addrs, err := netlink.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatalf("AddrList: %v", err)
	}
	out := []string{}
	for _, a := range addrs {
		out = append(out, a.IPNet.String())
	}
	slices.Sort(out)
	return out
}

// mobyAndKernel cleans IPVS (clean) with lo up, and returns a moby/ipvs
// handle and the proxy's Kernel adapter, closed when t ends: the two
// readers the read-alike tests compare.
func mobyAndKernel(t *testing.T) (*mobyipvs.Handle, ipvs.Kernel) {
	t.Helper()
	labnet.LinkUp(t, "lo")
	h := clean(t)
	k, _, _, closeKernel, err := ipvs.NewLinuxAdapters()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeKernel)
	return h, k
}

func mobyService(addr string, port uint16, proto uint16) *mobyipvs.Service {
	a := netip.MustParseAddr(addr)
	s := &mobyipvs.Service{Address: a.AsSlice(), Port: port, Protocol: proto, SchedName: "rr",
		AddressFamily: unix.AF_INET, Netmask: 0xffffffff}
	if a.Is6() {
		s.AddressFamily, s.Netmask = unix.AF_INET6, 128
	}
	return s
}

func destinations(t *testing.T, h *mobyipvs.Handle, s *mobyipvs.Service) map[string]*mobyipvs.Destination {
	t.Helper()
	ds, err := h.GetDestinations(s)
	if err != nil {
		t.Fatalf("GetDestinations: %v", err)
	}
	m := map[string]*mobyipvs.Destination{}
	for _, d := range ds {
		m[net.JoinHostPort(d.Address.String(), strconv.Itoa(int(d.Port)))] = d
	}
	return m
}

// setupPod creates pod <name> (labnet.NewPod: eth0 10.244.<idx>.2/24)
// with echo servers on :8080/TCP, which greets and then answers every
// line until the client closes, and :5353/UDP.
func setupPod(t *testing.T, name string, idx int) *labnet.Pod {
	t.Helper()
	p := labnet.NewPod(t, name, idx)
	labnet.Echo{Name: name, Lines: true}.Serve(t, p.Host, 8080, 5353)
	return p
}

// dialGreet connects to addr and returns the connection and the name of
// the pod that answered.
func dialGreet(t *testing.T, addr string) (*net.TCPConn, *bufio.Reader, string) {
	t.Helper()
	s, err := labnet.Greet(nil, addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.SetDeadline(time.Now().Add(30 * time.Second))
	return s.TCPConn, s.R, s.Name
}

// udpAsk sends one datagram from a fresh socket and returns the
// answering pod's name.
func udpAsk(t *testing.T, addr string) string {
	t.Helper()
	name, _, err := labnet.Exchange(nil, labnet.UDP, addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// cluster1 is a plan of one service with one virtual server.
func cluster1(spec string, dests ...string) []policy.ServicePlan {
	return []policy.ServicePlan{svc("one", vs(spec, dests...))}
}
