//go:build integration

package ipvswriter

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	mobyipvs "github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
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
	d := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "node0"}}
	if err := netlink.LinkAdd(d); err != nil {
		t.Fatalf("add node0: %v", err)
	}
	p := netip.MustParsePrefix(prefix)
	if err := netlink.AddrAdd(d, &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 32)}}); err != nil {
		t.Fatalf("node0 address: %v", err)
	}
	if err := netlink.LinkSetUp(d); err != nil {
		t.Fatalf("node0 up: %v", err)
	}
}

func svc(name string, vss ...policy.VirtualServer) policy.ServicePlan {
	key := policy.ServiceKey{Namespace: "default", Name: name}
	for i := range vss {
		vss[i].Service = key.String()
	}
	return policy.ServicePlan{Service: key, VirtualServers: vss}
}

// vs builds a virtual server from "Kind addr:port/PROTO" and destinations
// "addr:port" or "addr:port*weight".
func vs(spec string, dests ...string) policy.VirtualServer {
	kind, rest, _ := strings.Cut(spec, " ")
	ap, proto, _ := strings.Cut(rest, "/")
	a := netip.MustParseAddrPort(ap)
	v := policy.VirtualServer{Kind: policy.Kind(kind), Address: a.Addr(), Port: a.Port(),
		Protocol: policy.Protocol(proto), Scheduler: "rr", Destinations: []policy.Destination{}}
	for _, d := range dests {
		ds, w, ok := strings.Cut(d, "*")
		weight := int64(1)
		if ok {
			weight, _ = strconv.ParseInt(w, 10, 32)
		}
		dap := netip.MustParseAddrPort(ds)
		v.Destinations = append(v.Destinations, policy.Destination{Address: dap.Addr(), Port: dap.Port(), Weight: int32(weight)})
	}
	return v
}

func plan(sps ...policy.ServicePlan) policy.Plan {
	var p policy.Plan
	for _, sp := range sps {
		p.VirtualServers = append(p.VirtualServers, sp.VirtualServers...)
	}
	policy.SortVirtualServers(p.VirtualServers)
	return p
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

func writeSysctl(t *testing.T, key, value string) {
	t.Helper()
	if err := writeFile("/proc/sys/"+key, value); err != nil {
		t.Fatalf("sysctl %s=%s: %v", key, value, err)
	}
}

// --- pods: network namespaces wired by veth, as in integration/lab_test.go

type pod struct {
	name string
	ns   netns.NsHandle
	ip   net.IP
}

// setupPod creates a netns with eth0 10.244.<idx>.2/24 (root side
// 10.244.<idx>.1/24, default route via it), a TCP server on :8080 that
// greets with its name and then echoes lines until the client closes,
// and a UDP echo server on :5353.
func setupPod(t *testing.T, name string, idx int) *pod {
	t.Helper()
	ns, err := newNetns()
	if err != nil {
		t.Fatalf("%s: new netns: %v", name, err)
	}
	t.Cleanup(func() { ns.Close() })
	p := &pod{name: name, ns: ns, ip: net.IPv4(10, 244, byte(idx), 2).To4()}
	hostIP := &net.IPNet{IP: net.IPv4(10, 244, byte(idx), 1), Mask: net.CIDRMask(24, 32)}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "veth-" + name}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(ns))}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatalf("%s: add veth: %v", name, err)
	}
	t.Cleanup(func() { _ = netlink.LinkDel(veth) })
	if err := netlink.AddrAdd(veth, &netlink.Addr{IPNet: hostIP}); err != nil {
		t.Fatalf("%s: host addr: %v", name, err)
	}
	if err := netlink.LinkSetUp(veth); err != nil {
		t.Fatalf("%s: host veth up: %v", name, err)
	}
	nh, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatalf("%s: netlink handle: %v", name, err)
	}
	defer nh.Close()
	for _, l := range []string{"lo", "eth0"} {
		link, err := nh.LinkByName(l)
		if err != nil {
			t.Fatalf("%s: %s: %v", name, l, err)
		}
		if l == "eth0" {
			if err := nh.AddrAdd(link, &netlink.Addr{IPNet: &net.IPNet{IP: p.ip, Mask: net.CIDRMask(24, 32)}}); err != nil {
				t.Fatalf("%s: pod addr: %v", name, err)
			}
		}
		if err := nh.LinkSetUp(link); err != nil {
			t.Fatalf("%s: %s up: %v", name, l, err)
		}
	}
	if err := nh.RouteAdd(&netlink.Route{Gw: hostIP.IP}); err != nil {
		t.Fatalf("%s: default route: %v", name, err)
	}
	var ln net.Listener
	var pc net.PacketConn
	err = inNetns(ns, func() error {
		var err error
		if ln, err = net.Listen("tcp4", ":8080"); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp4", ":5353")
		return err
	})
	if err != nil {
		t.Fatalf("%s: listen in netns: %v", name, err)
	}
	t.Cleanup(func() { ln.Close(); pc.Close() })
	go serveTCP(ln, name)
	go serveUDP(pc, name)
	return p
}

func serveTCP(ln net.Listener, name string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			fmt.Fprintf(c, "%s\n", name)
			r := bufio.NewReader(c)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				fmt.Fprintf(c, "%s %s", name, line)
			}
		}()
	}
}

func serveUDP(pc net.PacketConn, name string) {
	buf := make([]byte, 1500)
	for {
		_, addr, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		_, _ = pc.WriteTo([]byte(name), addr)
	}
}

// dialGreet connects to addr and returns the connection and the name of
// the pod that answered.
func dialGreet(t *testing.T, addr string) (*net.TCPConn, *bufio.Reader, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp4", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(c)
	name, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("greeting from %s: %v", addr, err)
	}
	return c.(*net.TCPConn), r, strings.TrimSpace(name)
}

// udpAsk sends one datagram from a new unconnected socket and returns the
// answering pod's name and the socket's local address.
func udpAsk(t *testing.T, addr string) (string, netip.AddrPort) {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "0.0.0.0:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer pc.Close()
	dst := net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr))
	if _, err := pc.WriteTo([]byte("ping"), dst); err != nil {
		t.Fatalf("send to %s: %v", addr, err)
	}
	_ = pc.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 100)
	n, _, err := pc.ReadFrom(buf)
	if err != nil {
		t.Fatalf("answer from %s: %v", addr, err)
	}
	return string(buf[:n]), pc.LocalAddr().(*net.UDPAddr).AddrPort()
}

func inNetns(ns netns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := netns.Set(ns); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	return <-errc
}

func newNetns() (netns.NsHandle, error) {
	type result struct {
		ns  netns.NsHandle
		err error
	}
	rc := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		ns, err := netns.New()
		rc <- result{ns, err}
	}()
	r := <-rc
	return r.ns, r.err
}

// cluster1 is a plan of one service with one virtual server.
func cluster1(spec string, dests ...string) []policy.ServicePlan {
	return []policy.ServicePlan{svc("one", vs(spec, dests...))}
}
