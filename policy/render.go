package policy

import (
	"fmt"
	"io"
	"net/netip"
	"strings"
)

// WriteText renders the plan as a readable table: one block per virtual
// server, its destinations, and the reason. The output is stable.
func (p Plan) WriteText(w io.Writer) error { return p.WriteTextExplained(w, nil) }

// WriteTextExplained is WriteText with, under each virtual server, the
// endpoints leftOut (Engine.LeftOut) returns for it; nil lists none.
func (p Plan) WriteTextExplained(w io.Writer, leftOut func(*VirtualServer) []LeftOut) error {
	var b strings.Builder
	fmt.Fprintf(&b, "node %s: %d virtual servers\n", p.Node, len(p.VirtualServers))
	for i := range p.VirtualServers {
		vs := &p.VirtualServers[i]
		port := vs.PortName
		if port == "" {
			port = "-"
		}
		fmt.Fprintf(&b, "\n%s %s  %s  %s port %s\n", vs.Protocol, netip.AddrPortFrom(vs.Address, vs.Port), vs.Kind, vs.Service, port)
		fmt.Fprintf(&b, "  scheduler %s", vs.Scheduler)
		if len(vs.SchedulerFlags) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(vs.SchedulerFlags, ","))
		}
		fmt.Fprintf(&b, ", persistence %ds, policy %s, masquerade %s", vs.PersistenceTimeoutSeconds, vs.TrafficPolicy, vs.Masquerade)
		if vs.NoTrack {
			b.WriteString(", notrack")
		}
		if vs.InternalVia.IsValid() {
			fmt.Fprintf(&b, ", in-cluster clients via %s", vs.InternalVia)
		}
		b.WriteString("\n")
		if len(vs.Destinations) == 0 {
			b.WriteString(noDestinations(vs.WhenEmpty))
		}
		for _, d := range vs.Destinations {
			fmt.Fprintf(&b, "  -> %-24s weight %d\n", netip.AddrPortFrom(d.Address, d.Port), d.Weight)
		}
		if leftOut != nil {
			for _, l := range leftOut(vs) {
				fmt.Fprintf(&b, "  -x %-24s left out: %s\n", l.Endpoint, l.Rule)
			}
		}
		fmt.Fprintf(&b, "  reason: %s\n", vs.Reason)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// noDestinations is the line of a virtual server without destinations:
// what the data plane does with its traffic.
func noDestinations(when EmptyAction) string {
	switch when {
	case EmptyReject:
		return "  (no destinations; whenEmpty Reject: new connections are rejected)\n"
	case EmptyDrop:
		return "  (no destinations; whenEmpty Drop: packets are dropped)\n"
	}
	return "  (no destinations)\n"
}
