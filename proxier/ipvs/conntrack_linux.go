package ipvs

import (
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// netlinkConntrack is Conntrack over ctnetlink.
type netlinkConntrack struct{}

var _ Conntrack = netlinkConntrack{}

// replySource matches UDP flows whose reply comes from one endpoint.
type replySource struct{ ep netip.AddrPort }

func (f replySource) MatchConntrackFlow(flow *netlink.ConntrackFlow) bool {
	if flow.Forward.Protocol != unix.IPPROTO_UDP || flow.Reverse.SrcPort != f.ep.Port() {
		return false
	}
	src, ok := netip.AddrFromSlice(flow.Reverse.SrcIP)
	return ok && src.Unmap() == f.ep.Addr()
}

func (netlinkConntrack) DeleteUDP(ep netip.AddrPort) (int, error) {
	fam := netlink.InetFamily(unix.AF_INET)
	if ep.Addr().Is6() {
		fam = unix.AF_INET6
	}
	n, err := netlink.ConntrackDeleteFilters(netlink.ConntrackTable, fam, replySource{ep})
	return int(n), err
}
