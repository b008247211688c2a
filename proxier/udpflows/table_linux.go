package udpflows

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// Netlink is Table over ctnetlink: one dump of the family's table, and
// one delete request per stale flow, naming it by its tuples as dumped.
type Netlink struct{}

var _ Table = Netlink{}

// maxWalks bounds the walks of an interrupted dump, as kube-proxy's
// retries on EINTR (MaxAttemptsEINTR).
const maxWalks = 5

// DeleteUDP implements Table.
func (Netlink) DeleteUDP(v6 bool, stale func(policy.UDPFlow) bool) (int, error) {
	fam := netlink.InetFamily(unix.AF_INET)
	if v6 {
		fam = unix.AF_INET6
	}
	total := 0
	var err error
	for range maxWalks {
		var n uint
		n, err = netlink.ConntrackDeleteFilters(netlink.ConntrackTable, fam, staleFilter(stale))
		total += int(n)
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	if err != nil {
		return total, fmt.Errorf("walk the conntrack table: %w", err)
	}
	return total, nil
}

// staleFilter matches the UDP flows stale reports true for.
type staleFilter func(policy.UDPFlow) bool

func (f staleFilter) MatchConntrackFlow(flow *netlink.ConntrackFlow) bool {
	if flow.Forward.Protocol != unix.IPPROTO_UDP {
		return false
	}
	return f(policy.UDPFlow{
		OrigDst:  addrPort(flow.Forward.DstIP, flow.Forward.DstPort),
		ReplySrc: addrPort(flow.Reverse.SrcIP, flow.Reverse.SrcPort),
	})
}

func addrPort(ip net.IP, port uint16) netip.AddrPort {
	a, _ := netip.AddrFromSlice(ip)
	return netip.AddrPortFrom(a.Unmap(), port)
}
