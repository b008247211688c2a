package policy

import (
	"net/netip"
	"slices"
)

// LeftOut is an endpoint of a virtual server's service port and family
// that is not among its destinations, and the rule that left it out.
type LeftOut struct {
	Endpoint netip.AddrPort
	Rule     string
}

// LeftOut lists the endpoints of vs's service port in vs's family that
// are not its destinations, sorted, each with the rule that left it out
// in the terms of kube-proxy's CategorizeEndpoints (ready, serving,
// terminating, local, topology hints) or of our tiers. vs must come from
// a plan of e's current state. It explains a plan (--dry-run --output
// text); the sync never calls it. Nil when nothing was left out or the
// service is unknown.
func (e *Engine) LeftOut(vs *VirtualServer) []LeftOut {
	entry := e.services[vs.Service]
	if entry == nil {
		return nil
	}
	i := slices.IndexFunc(entry.svc.Ports, func(sp ServicePort) bool { return sp.Name == vs.PortName && sp.Protocol == vs.Protocol })
	if i < 0 {
		return nil
	}
	cands := candidates(e.slices[vs.Service], entry.svc.Ports[i], vs.Address.Is4(), e.cfg.NodeName)
	var out []LeftOut
	for ci := range cands {
		c := &cands[ci]
		ap := c.addrPort()
		if slices.ContainsFunc(vs.Destinations, func(d Destination) bool { return netip.AddrPortFrom(d.Address, d.Port) == ap }) {
			continue
		}
		out = append(out, LeftOut{Endpoint: ap, Rule: leftOutRule(c, vs.TrafficPolicy)})
	}
	return out
}

// leftOutRule says why c is not a destination of a virtual server under
// policy tp.
func leftOutRule(c *candidate, tp TrafficPolicy) string {
	switch {
	case !c.Ready && !c.Serving:
		if c.Terminating {
			return "terminating and not serving"
		}
		return "not ready"
	case !c.Ready && !c.Terminating:
		return "serving but not ready, and not terminating"
	case !c.Ready && tp == PolicyLocal:
		return "serving-terminating: used only when no local endpoint is ready"
	case !c.Ready:
		return "serving-terminating: used only when no endpoint is ready"
	case tp == PolicyLocal && !c.local:
		return "not local, and the traffic policy is Local"
	case tp == PolicyLocal:
		return "local and ready, yet not chosen"
	case tp == PolicyCluster:
		return "topology hints: not hinted for this node or zone"
	}
	return string(tp) + ": in a later tier than the destinations, or in none"
}
