//go:build integration

package ipvswriter

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	mobyipvs "github.com/moby/ipvs"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// TestVirtualServersReadAsMobyReadsThem: the Kernel's VirtualServers,
// which dumps on its own generic netlink socket rather than through
// moby/ipvs, lists every virtual server as moby/ipvs's GetServices
// does (address, protocol, port, scheduler, flags but the hashed one,
// persistence timeout), over a dump of many reads: IPv4 and IPv6, TCP,
// UDP and SCTP, several schedulers, persistence; and not a firewall
// mark's virtual server, which is never ours.
func TestVirtualServersReadAsMobyReadsThem(t *testing.T) {
	h, k := mobyAndKernel(t)
	const n = 3000 // about 600 KB of answer: a dump of many reads
	protos := []uint16{unix.IPPROTO_TCP, unix.IPPROTO_UDP, unix.IPPROTO_SCTP}
	scheds := []string{"rr", "wrr", "sh", "lc"}
	var ops []ipvs.Op
	for i := range n {
		addr := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})
		if i%10 == 9 {
			addr = netip.MustParseAddr(fmt.Sprintf("fd00:96::%x", i))
		}
		proto, _ := policy.ProtocolOfNumber(uint8(protos[i%3]))
		vs := ipvs.VirtualServer{Key: ipvs.Key{Address: addr, Protocol: proto, Port: uint16(1 + i%1000)}, Scheduler: scheds[i%4]}
		if i%7 == 0 {
			vs.Flags, vs.Timeout = ipvs.FlagPersistent, 10800
		}
		ops = append(ops, ipvs.Op{Kind: ipvs.OpAddService, VS: vs})
	}
	for i, err := range k.Write(ops) {
		if err != nil {
			t.Fatalf("add %s: %v", ops[i].VS, err)
		}
	}
	if err := h.NewService(&mobyipvs.Service{FWMark: 7, AddressFamily: unix.AF_INET, SchedName: "rr", Netmask: 0xffffffff}); err != nil {
		t.Fatalf("NewService fwmark 7: %v", err)
	}

	got, err := k.VirtualServers()
	if err != nil {
		t.Fatalf("VirtualServers: %v", err)
	}
	svcs, err := h.GetServices()
	if err != nil {
		t.Fatalf("GetServices: %v", err)
	}
	var want []ipvs.VirtualServer
	for _, s := range svcs {
		if s.FWMark != 0 {
			continue
		}
		a, _ := netip.AddrFromSlice(s.Address)
		proto, _ := policy.ProtocolOfNumber(uint8(s.Protocol))
		want = append(want, ipvs.VirtualServer{Key: ipvs.Key{Address: a.Unmap(), Protocol: proto, Port: s.Port},
			Scheduler: s.SchedName, Flags: s.Flags &^ ipvs.FlagHashed, Timeout: s.Timeout})
	}
	byKey := func(x, y ipvs.VirtualServer) int { return x.Key.Compare(y.Key) }
	slices.SortFunc(got, byKey)
	slices.SortFunc(want, byKey)
	if len(want) != n || len(svcs) != n+1 {
		t.Fatalf("moby/ipvs lists %d virtual servers (%d not a firewall mark's); %d were added and a firewall mark's", len(svcs), len(want), n)
	}
	if !slices.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("VirtualServers lists %d, moby/ipvs %d; first difference at %d:\n got %s\nwant %s", len(got), len(want), i, got[i], want[i])
			}
		}
		t.Fatalf("VirtualServers lists %d, moby/ipvs %d", len(got), len(want))
	}
	t.Logf("%d virtual servers read alike; the firewall mark's left out", len(got))
}
