package policy

import (
	"cmp"
	"net/netip"
	"slices"
)

// candidate is one endpoint of one service port in one address family,
// after deduplication.
type candidate struct {
	*Endpoint
	port  uint16 // target port, from the slice port matching the ServicePort
	local bool   // runs on this node
	// slice and index locate the copy, to rank duplicates.
	slice, index int32
}

func (c *candidate) addrPort() netip.AddrPort { return netip.AddrPortFrom(c.Address, c.port) }

func (c *candidate) destination(weight int32) Destination {
	return Destination{Address: c.Address, Port: c.port, Weight: weight, Local: c.local}
}

// candidates gathers the endpoints that serve sp in one family from the
// service's slices (sorted by name), sorted by address and port.
//
// Deduplication rule: the same address:port may be listed by several
// slices (or twice in one). It counts once. The ready copy wins; if that
// does not decide, the copy from the slice whose name sorts first wins,
// then the one listed first.
func candidates(sl []*EndpointSlice, sp ServicePort, v4 bool, nodeName string) []candidate {
	var all []candidate
	for si, s := range sl {
		if s.IPv4 != v4 {
			continue
		}
		port, ok := targetPort(s, sp)
		if !ok {
			continue
		}
		if all == nil {
			all = make([]candidate, 0, len(s.Endpoints))
		}
		for ei := range s.Endpoints {
			ep := &s.Endpoints[ei]
			local := nodeName != "" && ep.NodeName() == nodeName
			all = append(all, candidate{ep, port, local, int32(si), int32(ei)})
		}
	}
	slices.SortFunc(all, func(a, b candidate) int {
		if c := a.addrPort().Compare(b.addrPort()); c != 0 {
			return c
		}
		if a.Ready != b.Ready {
			if a.Ready {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(a.slice, b.slice), cmp.Compare(a.index, b.index))
	})
	// Keep the first, best-ranked copy of each address:port.
	return slices.CompactFunc(all, func(a, b candidate) bool { return a.addrPort() == b.addrPort() })
}

// targetPort finds the slice port whose name and protocol match sp.
func targetPort(s *EndpointSlice, sp ServicePort) (uint16, bool) {
	for _, p := range s.Ports {
		if p.Name == sp.Name && p.Protocol == sp.Protocol {
			return p.Port, true
		}
	}
	return 0, false
}
