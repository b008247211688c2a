//go:build integration

package integration

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

const (
	vipDevice = "kube-ipvs0"
	vip       = "10.96.0.10"
	podTCP    = 8080 // service 80/TCP -> pod 8080
	podUDP    = 5353 // service 53/UDP -> pod 5353
)

// TestIPVSMasqToPodNetns programs a ClusterIP-style IPVS service (rr, NAT)
// whose endpoints are echo servers in two "pod" network namespaces, sends
// real TCP and UDP traffic to the VIP from the root namespace and checks the
// answers, then reads the services back over netlink.
func TestIPVSMasqToPodNetns(t *testing.T) {
	writeSysctl(t, "net/ipv4/ip_forward", "1")
	writeSysctl(t, "net/ipv4/vs/conntrack", "1")
	addDummyVIP(t, vipDevice, vip)

	pods := []*pod{setupPod(t, "pod-a", 1), setupPod(t, "pod-b", 2)}

	h, err := ipvs.New("")
	if err != nil {
		t.Fatalf("ipvs.New: %v", err)
	}
	t.Cleanup(h.Close)
	tcpSvc := addService(t, h, unix.IPPROTO_TCP, 80, podTCP, pods)
	udpSvc := addService(t, h, unix.IPPROTO_UDP, 53, podUDP, pods)

	t.Run("GetServices", func(t *testing.T) {
		svcs, err := h.GetServices()
		if err != nil {
			t.Fatalf("GetServices: %v", err)
		}
		if len(svcs) != 2 {
			t.Fatalf("GetServices returned %d services, want 2", len(svcs))
		}
		for _, want := range []*ipvs.Service{tcpSvc, udpSvc} {
			i := slices.IndexFunc(svcs, func(s *ipvs.Service) bool {
				return s.Protocol == want.Protocol && s.Port == want.Port && s.Address.Equal(want.Address)
			})
			if i < 0 {
				t.Fatalf("service %s:%d proto %d not listed", want.Address, want.Port, want.Protocol)
			}
			got := svcs[i]
			if got.SchedName != "rr" || got.AddressFamily != unix.AF_INET {
				t.Errorf("service %s:%d: sched %q family %d, want rr/AF_INET", got.Address, got.Port, got.SchedName, got.AddressFamily)
			}
			dsts, err := h.GetDestinations(got)
			if err != nil {
				t.Fatalf("GetDestinations: %v", err)
			}
			var addrs []string
			for _, d := range dsts {
				addrs = append(addrs, fmt.Sprintf("%s:%d", d.Address, d.Port))
				if d.ConnectionFlags&ipvs.ConnectionFlagFwdMask != ipvs.ConnectionFlagMasq || d.Weight != 1 {
					t.Errorf("destination %s:%d: flags %#x weight %d, want masq weight 1", d.Address, d.Port, d.ConnectionFlags, d.Weight)
				}
			}
			slices.Sort(addrs)
			port := podTCP
			if want.Protocol == unix.IPPROTO_UDP {
				port = podUDP
			}
			wantAddrs := []string{fmt.Sprintf("10.244.1.2:%d", port), fmt.Sprintf("10.244.2.2:%d", port)}
			if !slices.Equal(addrs, wantAddrs) {
				t.Errorf("destinations %v, want %v", addrs, wantAddrs)
			}
		}
	})

	t.Run("TCP", func(t *testing.T) {
		seen := map[string]int{}
		for range 4 {
			name, peer, local := tcpEcho(t, net.JoinHostPort(vip, "80"))
			// Masquerade mode only DNATs: the pod must see the client's own address.
			if peer != local {
				t.Errorf("%s saw peer %s, client was %s", name, peer, local)
			}
			seen[name]++
		}
		t.Logf("TCP answers per pod: %v", seen)
		if seen["pod-a"] != 2 || seen["pod-b"] != 2 {
			t.Errorf("round robin over 4 connections gave %v, want 2 each", seen)
		}
		// Each connection is an entry in IPVS's connection table, attached
		// to the destination that got it (Stats lag: folded every 2 s).
		dsts, err := h.GetDestinations(tcpSvc)
		if err != nil {
			t.Fatalf("GetDestinations: %v", err)
		}
		for _, d := range dsts {
			if n := d.ActiveConnections + d.InactiveConnections; n != 2 {
				t.Errorf("destination %s: %d active + %d inactive connections, want 2 in total", d.Address, d.ActiveConnections, d.InactiveConnections)
			}
		}
	})

	t.Run("UDP", func(t *testing.T) {
		seen := map[string]int{}
		for range 2 {
			name, peer, local := udpEcho(t, net.JoinHostPort(vip, "53"))
			if peer != local {
				t.Errorf("%s saw peer %s, client was %s", name, peer, local)
			}
			seen[name]++
		}
		t.Logf("UDP answers per pod: %v", seen)
		if seen["pod-a"] != 1 || seen["pod-b"] != 1 {
			t.Errorf("round robin over 2 flows gave %v, want 1 each", seen)
		}
	})
}

// TestNftablesSmoke creates table inet kip-smoke with an output chain whose
// rule counts UDP packets to port 9999, sends three such packets over
// loopback, reads the counter back, and deletes the table.
func TestNftablesSmoke(t *testing.T) {
	linkUp(t, "lo")
	c, err := nftables.New()
	if err != nil {
		t.Fatalf("nftables.New: %v", err)
	}
	policy := nftables.ChainPolicyAccept
	tbl := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "kip-smoke"})
	ch := c.AddChain(&nftables.Chain{
		Name: "output", Table: tbl, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter, Policy: &policy,
	})
	c.AddRule(&nftables.Rule{Table: tbl, Chain: ch, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_UDP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(9999)},
		&expr.Counter{},
	}})
	if err := c.Flush(); err != nil {
		t.Fatalf("flush (create): %v", err)
	}
	t.Cleanup(func() {
		c.DelTable(tbl)
		_ = c.Flush()
	})

	tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		t.Fatalf("ListTablesOfFamily: %v", err)
	}
	if !slices.ContainsFunc(tables, func(x *nftables.Table) bool { return x.Name == "kip-smoke" }) {
		t.Fatalf("table inet kip-smoke not listed")
	}

	// Unconnected socket: ICMP port-unreachable must not turn later sends into errors.
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	dst := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9999}
	for range 3 {
		if _, err := conn.WriteTo([]byte("x"), dst); err != nil {
			t.Fatalf("send to %s: %v", dst, err)
		}
	}
	conn.Close()

	rules, err := c.GetRules(tbl, ch)
	if err != nil {
		t.Fatalf("GetRules: %v", err)
	}
	if len(rules) != 1 {
		t.Fatalf("got %d rules, want 1", len(rules))
	}
	var packets uint64 = 1<<64 - 1
	for _, e := range rules[0].Exprs {
		if ctr, ok := e.(*expr.Counter); ok {
			packets = ctr.Packets
		}
	}
	if packets != 3 {
		t.Errorf("rule counter = %d packets, want 3", packets)
	}

	c.DelTable(tbl)
	if err := c.Flush(); err != nil {
		t.Fatalf("flush (delete): %v", err)
	}
	tables, err = c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		t.Fatalf("ListTablesOfFamily: %v", err)
	}
	if slices.ContainsFunc(tables, func(x *nftables.Table) bool { return x.Name == "kip-smoke" }) {
		t.Errorf("table inet kip-smoke still listed after delete")
	}
}

// --- helpers -----------------------------------------------------------------

type pod struct {
	name string
	ns   netns.NsHandle
	ip   net.IP
}

// setupPod creates a network namespace wired to the root namespace by a veth
// pair (root 10.244.<idx>.1/24, pod eth0 10.244.<idx>.2/24, default route via
// the root side) and starts TCP and UDP echo servers inside it.
func setupPod(t *testing.T, name string, idx int) *pod {
	t.Helper()
	ns, err := newNetns()
	if err != nil {
		t.Fatalf("%s: new netns: %v", name, err)
	}
	t.Cleanup(func() { ns.Close() })
	p := &pod{name: name, ns: ns, ip: net.IPv4(10, 244, byte(idx), 2).To4()}
	hostIP := &net.IPNet{IP: net.IPv4(10, 244, byte(idx), 1), Mask: net.CIDRMask(24, 32)}

	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: "veth-" + name},
		PeerName:      "eth0",
		PeerNamespace: netlink.NsFd(int(ns)),
	}
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

	// Sockets stay in the netns they were created in, so only creation needs
	// a thread inside the pod; serving works from any goroutine.
	var ln net.Listener
	var pc net.PacketConn
	err = inNetns(ns, func() error {
		var err error
		if ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", podTCP)); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp4", fmt.Sprintf(":%d", podUDP))
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

// serveTCP answers each connection with "<name> peer=<remote addr>".
func serveTCP(ln net.Listener, name string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		fmt.Fprintf(c, "%s peer=%s\n", name, c.RemoteAddr())
		c.Close()
	}
}

// serveUDP answers each datagram with "<name> peer=<remote addr>".
func serveUDP(pc net.PacketConn, name string) {
	buf := make([]byte, 1500)
	for {
		_, addr, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		_, _ = pc.WriteTo([]byte(fmt.Sprintf("%s peer=%s\n", name, addr)), addr)
	}
}

func tcpEcho(t *testing.T, addr string) (name, peer, local string) {
	t.Helper()
	c, err := net.DialTimeout("tcp4", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("read from %s: %v", addr, err)
	}
	name, peer = parseEcho(t, line)
	return name, peer, c.LocalAddr().String()
}

func udpEcho(t *testing.T, addr string) (name, peer, local string) {
	t.Helper()
	c, err := net.Dial("udp4", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatalf("write to %s: %v", addr, err)
	}
	buf := make([]byte, 1500)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("read from %s: %v", addr, err)
	}
	name, peer = parseEcho(t, string(buf[:n]))
	return name, peer, c.LocalAddr().String()
}

// parseEcho splits "<name> peer=<addr>\n"; KIP_VMLAB_EXPECT_PREFIX (for
// checking that the lab reports failures) overrides the expected "pod-".
func parseEcho(t *testing.T, line string) (name, peer string) {
	t.Helper()
	want := "pod-"
	if v := os.Getenv("KIP_VMLAB_EXPECT_PREFIX"); v != "" {
		want = v
	}
	name, rest, ok := strings.Cut(strings.TrimSpace(line), " peer=")
	if !ok || !strings.HasPrefix(name, want) {
		t.Fatalf("unexpected echo %q (want \"%s…peer=…\")", line, want)
	}
	return name, rest
}

func addService(t *testing.T, h *ipvs.Handle, proto, port, podPort uint16, pods []*pod) *ipvs.Service {
	t.Helper()
	svc := &ipvs.Service{
		Address:       net.ParseIP(vip).To4(),
		Protocol:      proto,
		Port:          port,
		SchedName:     "rr",
		AddressFamily: unix.AF_INET,
		Netmask:       0xffffffff,
	}
	if err := h.NewService(svc); err != nil {
		t.Fatalf("NewService %s:%d/%d: %v", vip, port, proto, err)
	}
	t.Cleanup(func() { _ = h.DelService(svc) })
	for _, p := range pods {
		d := &ipvs.Destination{
			Address:         p.ip,
			Port:            podPort,
			Weight:          1,
			ConnectionFlags: ipvs.ConnectionFlagMasq,
			AddressFamily:   unix.AF_INET,
		}
		if err := h.NewDestination(svc, d); err != nil {
			t.Fatalf("NewDestination %s:%d: %v", p.ip, podPort, err)
		}
	}
	return svc
}

func addDummyVIP(t *testing.T, name, ip string) {
	t.Helper()
	d := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: name}}
	if err := netlink.LinkAdd(d); err != nil {
		t.Fatalf("add dummy %s: %v", name, err)
	}
	t.Cleanup(func() { _ = netlink.LinkDel(d) })
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP(ip), Mask: net.CIDRMask(32, 32)}}
	if err := netlink.AddrAdd(d, addr); err != nil {
		t.Fatalf("add %s to %s: %v", ip, name, err)
	}
	if err := netlink.LinkSetUp(d); err != nil {
		t.Fatalf("set %s up: %v", name, err)
	}
}

func linkUp(t *testing.T, name string) {
	t.Helper()
	l, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatalf("link %s: %v", name, err)
	}
	if err := netlink.LinkSetUp(l); err != nil {
		t.Fatalf("set %s up: %v", name, err)
	}
}

func writeSysctl(t *testing.T, key, value string) {
	t.Helper()
	if err := os.WriteFile("/proc/sys/"+key, []byte(value), 0o644); err != nil {
		t.Fatalf("sysctl %s=%s: %v", key, value, err)
	}
}

// inNetns runs fn on a fresh OS thread switched into ns. The thread stays
// locked and is discarded when the goroutine ends, so its namespace never
// leaks into other goroutines.
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

// newNetns creates an unnamed network namespace and returns a handle to it
// without moving any long-lived thread into it.
func newNetns() (netns.NsHandle, error) {
	type result struct {
		ns  netns.NsHandle
		err error
	}
	rc := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: this thread ends up in the new netns
		ns, err := netns.New()
		rc <- result{ns, err}
	}()
	r := <-rc
	return r.ns, r.err
}
