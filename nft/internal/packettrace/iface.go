package packettrace

import (
	"net/netip"

	"golang.org/x/sys/unix"
)

// Route is one route of the node: packets to Prefix leave by Dev.
type Route struct {
	Prefix netip.Prefix
	Dev    string
}

// loopback is the interface a packet the host sends to itself comes back
// in on.
const loopback = "lo"

// route is the interface a packet to dst leaves by: "lo" for a local
// address, else the longest prefix of Node.Routes holding it, "" when
// none does.
func (t *Tracer) route(dst netip.Addr) string {
	if t.local[dst] {
		return loopback
	}
	best, dev := -1, ""
	for _, r := range t.routes {
		if r.Prefix.Contains(dst) && r.Prefix.Bits() > best {
			best, dev = r.Prefix.Bits(), r.Dev
		}
	}
	return dev
}

// fibOifName is what fib daddr oifname reads: the route's interface, and
// nothing for a local address (nft_fib4_eval stores no interface for
// RTN_LOCAL).
func (t *Tracer) fibOifName(dst netip.Addr) string {
	if t.local[dst] {
		return ""
	}
	return t.route(dst)
}

// ifName is a name as meta iifname, meta oifname and fib oifname load
// it: IFNAMSIZ bytes, NUL-padded; all zero for no interface.
func ifName(name string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}
