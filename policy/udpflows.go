package policy

import (
	"iter"
	"net/netip"
	"slices"
)

// UDP conntrack flows. A UDP client keeps its conntrack flow (and so its
// endpoint) for as long as it keeps sending: unlike TCP, nothing ends the
// flow when its endpoint goes. kube-proxy therefore deletes, after a sync,
// every UDP flow sent to a service's address and port whose replies come
// from no serving endpoint of that port (its conntrack reconciler,
// pkg/proxy/conntrack CleanStaleEntries). The rules are decided here; the
// reconciler in proxier/udpflows only walks the kernel's table with them.
//
// As kube-proxy: an endpoint serves while its serving condition holds,
// terminating or not, whatever the traffic policies and topology chose
// (a flow's endpoint is not changed by a change of the service, as TCP's
// is not); a port without any serving endpoint keeps its flows (nothing
// could take them over). Unlike kube-proxy, which matches a NodePort on
// any address, a flow is only ours when its destination is one of the
// plan's UDP virtual servers: a NodePort on the addresses this node
// serves it on, and never an address another service owns.

// UDPServing is one UDP virtual server's address and port, and the
// endpoints serving its port: the only sources a flow to that address
// and port may have its replies from.
type UDPServing struct {
	Frontend netip.AddrPort
	// Endpoints are sorted and never empty; the virtual servers of one
	// port of one family share the slice.
	Endpoints []netip.AddrPort
}

// UDPFlow is what the rules read of a UDP conntrack flow: where its
// client sent it, and where its replies come from (the endpoint the
// data plane sent it to, or the destination itself when nothing did).
type UDPFlow struct {
	OrigDst, ReplySrc netip.AddrPort
}

// udpServing lists, for each UDP virtual server of vss (one service's,
// owned), the serving endpoints of its port in its family; those whose
// port has none are left out. Each port's endpoints are gathered once.
func (e *Engine) udpServing(svc *Service, vss []VirtualServer) []UDPServing {
	type portKey struct {
		v4   bool
		name string
	}
	var out []UDPServing
	var byPort map[portKey][]netip.AddrPort
	for i := range vss {
		vs := &vss[i]
		if vs.Protocol != ProtocolUDP {
			continue
		}
		k := portKey{vs.Address.Is4(), vs.PortName}
		eps, seen := byPort[k]
		if !seen {
			if byPort == nil {
				byPort = map[portKey][]netip.AddrPort{}
			}
			eps = e.servingEndpoints(svc, k.name, k.v4)
			byPort[k] = eps
		}
		if len(eps) > 0 {
			out = append(out, UDPServing{Frontend: netip.AddrPortFrom(vs.Address, vs.Port), Endpoints: eps})
		}
	}
	return out
}

// servingEndpoints are the serving endpoints (address and target port)
// of the service's UDP port named name in one family, sorted.
func (e *Engine) servingEndpoints(svc *Service, name string, v4 bool) []netip.AddrPort {
	i := slices.IndexFunc(svc.Ports, func(p ServicePort) bool { return p.Name == name && p.Protocol == ProtocolUDP })
	if i < 0 {
		return nil
	}
	var out []netip.AddrPort
	for _, c := range candidates(e.slices[svc.Key], svc.Ports[i], v4, e.cfg.NodeName) {
		if c.Serving {
			out = append(out, c.addrPort())
		}
	}
	return out // candidates are sorted by address and port
}

// StaleUDPFlows holds the rules for the node's UDP flows: which flows to
// the plan's UDP virtual servers are stale. The zero value finds none.
// The loop keeps one across syncs and changes only the services a sync
// changed (SetService), so that a change costs its own virtual servers,
// not an index of every UDP service made anew.
type StaleUDPFlows struct {
	serving map[netip.AddrPort]udpFrontend
	v4, v6  int // frontends of each family
}

// udpFrontend is one UDP virtual server's serving endpoints and the
// service that gave them.
type udpFrontend struct {
	svc ServiceKey
	eps []netip.AddrPort
}

// NewStaleUDPFlows indexes the UDP virtual servers of every service
// (ServicePlan.UDPServing). A virtual server belongs to one service only
// (ownership), so no frontend is given twice; if one were, its last
// serving set would count.
func NewStaleUDPFlows(services iter.Seq[[]UDPServing]) StaleUDPFlows {
	var s StaleUDPFlows
	for servings := range services {
		s.SetService(ServiceKey{}, nil, servings)
	}
	return s
}

// SetService replaces the rules service svc gave, old (nil for none),
// with now (nil: it gives none any more). A frontend of old that another
// service has given since (a virtual server that changed hands in one
// sync) is left to that service.
func (s *StaleUDPFlows) SetService(svc ServiceKey, old, now []UDPServing) {
	for _, u := range old {
		f := unmapAddrPort(u.Frontend)
		if cur, ok := s.serving[f]; ok && cur.svc == svc {
			delete(s.serving, f)
			s.count(f, -1)
		}
	}
	if len(now) > 0 && s.serving == nil {
		s.serving = make(map[netip.AddrPort]udpFrontend, len(now))
	}
	for _, u := range now {
		f := unmapAddrPort(u.Frontend)
		if _, ok := s.serving[f]; !ok {
			s.count(f, 1)
		}
		s.serving[f] = udpFrontend{svc: svc, eps: u.Endpoints}
	}
}

func (s *StaleUDPFlows) count(f netip.AddrPort, n int) {
	if f.Addr().Is4() {
		s.v4 += n
	} else {
		s.v6 += n
	}
}

// Families reports whether any UDP virtual server has IPv4 (IPv6)
// serving endpoints: a family without one has no stale flow, and its
// table need not be read.
func (s StaleUDPFlows) Families() (v4, v6 bool) { return s.v4 > 0, s.v6 > 0 }

// Stale reports whether a UDP flow is to be deleted: its original
// destination is one of the UDP virtual servers and its reply source is
// none of that virtual server's serving endpoints. Any other flow, to an
// address and port not ours, is never stale.
func (s StaleUDPFlows) Stale(f UDPFlow) bool {
	fe, ok := s.serving[unmapAddrPort(f.OrigDst)]
	if !ok {
		return false
	}
	_, found := slices.BinarySearchFunc(fe.eps, unmapAddrPort(f.ReplySrc), netip.AddrPort.Compare)
	return !found
}

// unmapAddrPort is ap with an IPv4-mapped IPv6 address as IPv4, as the
// kernel's IPv4 flows may be given.
func unmapAddrPort(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
