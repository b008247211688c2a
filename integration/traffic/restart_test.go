//go:build integration

package traffic

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/moby/ipvs"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/cmd/kube-ipvs-proxy/app"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
)

// linePort is where the line-echo server of these tests listens.
const linePort = 9000

// serveLines starts, in x, a TCP server that echoes every line back for
// as long as the connection lives.
func (h *harness) serveLines(x *host) {
	h.t.Helper()
	var ln net.Listener
	h.must(x.Do(func() (err error) { ln, err = net.Listen("tcp4", ":9000"); return err }))
	h.t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
}

// lineService is default/<name>: port "line" TCP 9000 on clusterIP with
// the given node port, served by the pods' line-echo servers.
func (l *lab) lineService(name, clusterIP string, nodePort uint16, pods ...string) policy.ServiceKey {
	l.t.Helper()
	key := policy.ServiceKey{Namespace: "default", Name: name}
	svc := &policy.Service{Key: key, ClusterIPs: []netip.Addr{netip.MustParseAddr(clusterIP)},
		Ports: []policy.ServicePort{{Name: "line", Protocol: policy.ProtocolTCP, Port: linePort, NodePort: nodePort}}}
	if ws := l.engine.UpsertService(svc); len(ws) > 0 {
		l.t.Fatalf("service %s: warnings %v", key, ws)
	}
	sl := &policy.EndpointSlice{Name: name + "-v4", Service: key, IPv4: true,
		Ports: []policy.EndpointPort{{Name: "line", Protocol: policy.ProtocolTCP, Port: linePort}}}
	for _, p := range pods {
		sl.Endpoints = append(sl.Endpoints, l.ep(p))
	}
	l.engine.UpsertEndpointSlice(sl)
	return key
}

// lineConn is an established connection to a line-echo server.
type lineConn struct {
	net.Conn
	r *bufio.Reader
}

func (h *harness) dialLines(from *host, addr string) *lineConn {
	h.t.Helper()
	var c net.Conn
	h.must(from.Do(func() (err error) { c, err = net.DialTimeout("tcp4", addr, 2*time.Second); return err }))
	h.t.Cleanup(func() { c.Close() })
	return &lineConn{c, bufio.NewReader(c)}
}

// roundTrip sends a line and expects it back.
func (c *lineConn) roundTrip(t *testing.T, line string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		t.Fatalf("write %q: %v", line, err)
	}
	got, err := c.r.ReadString('\n')
	if err != nil || strings.TrimSpace(got) != line {
		t.Fatalf("read back %q, %v; want %q", got, err, line)
	}
}

// TestRestartChangesNothingAndKeepsConnections: a new data plane instance
// (a restarted proxy) given the same plan makes no IPVS change, replaces
// the nftables table atomically, and an established, masqueraded
// NodePort connection to a remote endpoint survives.
func TestRestartChangesNothingAndKeepsConnections(t *testing.T) {
	l := newLab(t)
	l.serveLines(l.pod("pod-b1"))
	l.lineService("long", "10.96.9.1", 30090, "pod-b1")
	plan := l.resync()
	conn := l.dialLines(l.client, hostPort(l.root.v4, 30090))
	conn.roundTrip(t, "before restart")

	dp2, err := proxier.NewDataPlane(proxier.DataPlaneConfig{Interface: "kube-ipvs0", ClusterCIDRs: clusterCIDRs, GracefulPeriod: time.Second})
	if err != nil {
		t.Fatalf("NewDataPlane (restart): %v", err)
	}
	defer dp2.Close()
	if err := dp2.Resync(plan); err != nil {
		t.Fatalf("Resync after restart: %v", err)
	}
	if ops := dp2.IPVSOps(); len(ops) != 0 {
		t.Errorf("the restarted data plane made IPVS changes: %v", ops)
	}
	conn.roundTrip(t, "after restart")
	fresh := l.dialLines(l.client, hostPort(l.root.v4, 30090))
	fresh.roundTrip(t, "new connection after restart")
}

// TestCleanupLeavesForeignStateAlone: foreign IPVS virtual servers (on a
// foreign address, on a node address, and on a node address with a port
// that is our NodePort only in the other family) and a foreign nftables
// table survive a sync and `kube-ipvs-proxy --cleanup`, which removes our
// table, virtual servers (our NodePorts included) and kube-ipvs0.
func TestCleanupLeavesForeignStateAlone(t *testing.T) {
	l := newLab(t)
	ipv, err := ipvs.New("")
	if err != nil {
		t.Fatalf("ipvs handle: %v", err)
	}
	foreignVS := func(addr string, port uint16) *ipvs.Service {
		a := net.ParseIP(addr)
		s := &ipvs.Service{Address: a, Protocol: unix.IPPROTO_TCP, Port: port, AddressFamily: unix.AF_INET, SchedName: "rr", Netmask: 0xffffffff}
		if a.To4() == nil {
			s.AddressFamily, s.Netmask = unix.AF_INET6, 128
		}
		return s
	}
	foreigns := []*ipvs.Service{
		foreignVS("192.0.2.77", 80),
		foreignVS(l.root.v4.String(), 22),    // a node address, no NodePort of ours
		foreignVS(l.root.v6.String(), 30091), // 30091/TCP is our NodePort in IPv4 only
	}
	for _, f := range foreigns {
		if err := ipv.NewService(f); err != nil {
			t.Fatalf("foreign virtual server %s:%d: %v", f.Address, f.Port, err)
		}
	}
	conn, err := nftables.New()
	if err != nil {
		t.Fatalf("nftables: %v", err)
	}
	table := conn.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "foreign"})
	chain := conn.AddChain(&nftables.Chain{Name: "input", Table: table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter})
	conn.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: []expr.Any{&expr.Counter{}}})
	if err := conn.Flush(); err != nil {
		t.Fatalf("foreign table: %v", err)
	}
	// Registered after newLab's cleanup, so it runs first: the lab then
	// checks that nothing of ours or theirs is left.
	t.Cleanup(func() {
		for _, f := range foreigns {
			if err := ipv.DelService(f); err != nil {
				t.Errorf("delete the foreign virtual server %s:%d: %v", f.Address, f.Port, err)
			}
		}
		ipv.Close()
		conn.DelTable(table)
		if err := conn.Flush(); err != nil {
			t.Errorf("delete the foreign table: %v", err)
		}
	})

	l.setService(service("web", []string{"10.96.9.2"}), l.ep("pod-a1"))
	// Our NodePorts: 30091/TCP on IPv4 only, 30092/TCP on IPv6 only (on
	// node-a's IPv6 address, next to the foreign [v6]:30091).
	nodePort := func(port int32) func(*policy.Service) {
		return func(s *policy.Service) {
			s.Ports = []policy.ServicePort{{Name: "http", Protocol: policy.ProtocolTCP, Port: 80, NodePort: uint16(port)}}
		}
	}
	l.setService(service("np4", []string{"10.96.9.3"}, nodePort(30091)), l.ep("pod-a1"))
	l.setService(service("np6", []string{"fd00:96::93"}, nodePort(30092)), l.ep6("pod-a1"))
	l.resync()
	survivors := func(when string) {
		t.Helper()
		svcs, err := ipv.GetServices()
		if err != nil {
			t.Fatalf("%s: list virtual servers: %v", when, err)
		}
		for _, f := range foreigns {
			found := false
			for _, s := range svcs {
				found = found || (s.Address.Equal(f.Address) && s.Port == f.Port && s.Protocol == f.Protocol)
			}
			if !found {
				t.Errorf("%s: the foreign virtual server %s:%d is gone", when, f.Address, f.Port)
			}
		}
	}
	survivors("after Resync")
	// The command's own --cleanup, as an operator runs it.
	opts, err := app.ParseFlags([]string{"--cleanup", "--hostname-override", nodeA}, io.Discard)
	if err == nil {
		err = opts.Validate()
	}
	if err != nil {
		t.Fatalf("--cleanup flags: %v", err)
	}
	var stderr strings.Builder
	if code := app.Run(context.Background(), opts, io.Discard, &stderr); code != app.ExitOK {
		t.Fatalf("--cleanup exited %d: %s", code, stderr.String())
	}
	survivors("after --cleanup")
	svcs, err := ipv.GetServices()
	if err != nil || len(svcs) != len(foreigns) {
		t.Errorf("after Cleanup IPVS holds %d virtual servers (%v), want only the %d foreign ones", len(svcs), err, len(foreigns))
	}
	tables, err := conn.ListTables()
	if err != nil {
		t.Fatalf("list tables: %v", err)
	}
	var names []string
	for _, tb := range tables {
		names = append(names, tb.Name)
	}
	if strings.Join(names, ",") != "foreign" {
		t.Errorf("after Cleanup the tables are %v, want only foreign", names)
	}
}
