package hostaddr

import (
	"net/netip"
	"slices"
)

// Addr is one address of one interface.
type Addr struct {
	Link string
	IP   netip.Addr
}

// Select keeps the addresses NodePorts may use: not on the excluded link
// (the dummy interface holding service addresses), not loopback, not
// IPv6 link-local, as kube-proxy's GetAllLocalAddressesExcept. The result
// is sorted and has no duplicates (an address may sit on several links).
func Select(all []Addr, exclude string) []netip.Addr {
	var out []netip.Addr
	for _, a := range all {
		ip := a.IP.Unmap()
		switch {
		case a.Link == exclude, !ip.IsValid(), ip.IsLoopback(), ip.Is6() && ip.IsLinkLocalUnicast():
			continue
		}
		out = append(out, ip)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}
