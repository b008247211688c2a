package policy

import (
	"fmt"
	"io"
	"net/netip"
	"strings"
)

// WriteText renders the plan as a readable table: one block per virtual
// server, its destinations, and the reason. The output is stable.
func (p Plan) WriteText(w io.Writer) error {
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
		fmt.Fprintf(&b, ", persistence %ds, policy %s", vs.PersistenceTimeoutSeconds, vs.TrafficPolicy)
		if vs.NoTrack {
			b.WriteString(", notrack")
		}
		if vs.InternalVia.IsValid() {
			fmt.Fprintf(&b, ", in-cluster clients via %s", vs.InternalVia)
		}
		b.WriteString("\n")
		if len(vs.Destinations) == 0 {
			b.WriteString("  (no destinations)\n")
		}
		for _, d := range vs.Destinations {
			fmt.Fprintf(&b, "  -> %-24s weight %d\n", netip.AddrPortFrom(d.Address, d.Port), d.Weight)
		}
		fmt.Fprintf(&b, "  reason: %s\n", vs.Reason)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
