//go:build integration

package labnet

import (
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// UDPFlow is an IPv4 UDP conntrack flow as the tests see it: where its
// first packet was sent (a virtual server, or a pod straight) and who
// answered (the endpoint IPVS chose).
type UDPFlow struct{ Dst, ReplySrc netip.AddrPort }

// String is "destination>reply source", as
// "10.96.21.53:53>10.244.1.11:5353".
func (f UDPFlow) String() string { return f.Dst.String() + ">" + f.ReplySrc.String() }

// SentTo is the destination alone, as "10.96.21.53:53".
func (f UDPFlow) SentTo() string { return f.Dst.String() }

// AnsweredBy is the reply source alone, as "10.244.1.11:5353".
func (f UDPFlow) AnsweredBy() string { return f.ReplySrc.String() }

// CountUDPFlows counts the IPv4 UDP conntrack flows of the calling
// thread's network namespace by key: UDPFlow.String, UDPFlow.SentTo or
// UDPFlow.AnsweredBy.
func CountUDPFlows(t testing.TB, key func(UDPFlow) string) map[string]int {
	t.Helper()
	flows, err := netlink.ConntrackTableList(netlink.ConntrackTable, unix.AF_INET)
	if err != nil {
		t.Fatalf("list the conntrack table: %v", err)
	}
	m := map[string]int{}
	for _, f := range flows {
		if f.Forward.Protocol != unix.IPPROTO_UDP {
			continue
		}
		dst, _ := netip.AddrFromSlice(f.Forward.DstIP)
		src, _ := netip.AddrFromSlice(f.Reverse.SrcIP)
		m[key(UDPFlow{netip.AddrPortFrom(dst.Unmap(), f.Forward.DstPort), netip.AddrPortFrom(src.Unmap(), f.Reverse.SrcPort)})]++
	}
	return m
}
