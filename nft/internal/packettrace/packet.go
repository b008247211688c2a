package packettrace

import (
	"fmt"
	"net/netip"
	"strings"
)

// Proto is a packet's layer 4 protocol.
type Proto string

// The protocols a packet may carry. ICMP is ICMP or ICMPv6, by the
// packet's family (an echo request: ping).
const (
	TCP  Proto = "tcp"
	UDP  Proto = "udp"
	SCTP Proto = "sctp"
	ICMP Proto = "icmp"
)

// number is the IP protocol number of p in the family of a v4 or v6
// packet.
func (p Proto) number(v4 bool) (uint8, error) {
	switch p {
	case TCP:
		return 6, nil
	case UDP:
		return 17, nil
	case SCTP:
		return 132, nil
	case ICMP:
		if v4 {
			return 1, nil
		}
		return 58, nil
	}
	return 0, fmt.Errorf("protocol %q: want tcp, udp, sctp or icmp", p)
}

// State is the conntrack state a packet has once conntrack has seen it,
// unless a raw chain NOTRACKs it first.
type State string

// Conntrack states. StateNew is the first packet of a connection: only it
// passes the NAT chains. StateEstablished is a later packet (or a reply) of a
// connection whose NAT, if any, was decided by its first packet.
// StateUntracked is a packet conntrack skips without a raw chain's notrack.
const (
	StateNew         State = "new"
	StateEstablished State = "established"
	StateUntracked   State = "untracked"
)

// Packet is one packet to trace.
type Packet struct {
	// Src and Dst are its addresses and ports (ports are ignored for
	// ICMP). Both must be of one family.
	Src, Dst netip.AddrPort
	Proto    Proto
	// FromHost says a host process sent it (the OUTPUT path); otherwise
	// it arrives from the network or a pod (the PREROUTING path).
	FromHost bool
	// InIface is the interface a packet that is not FromHost comes in
	// on; empty means the one the node's route to its source leaves by
	// (Node.Routes), as a pod or a neighbour on that link sends it.
	InIface string
	// State is its conntrack state; empty means StateNew.
	State State
	// Backend, when valid, is the address of the IPVS destination the
	// scheduler picks (it must be one); otherwise the first destination
	// in address order is picked.
	Backend netip.Addr
	// Orig, when valid, says the packet is a reply: it is the destination
	// of its connection's original tuple, the virtual server its client
	// (Dst) connected to. Otherwise the packet is in its connection's
	// original direction. Either way it names the connection whose
	// conntrack mark ("ct mark") the packet reads and sets: the Tracer
	// keeps each connection's mark from one trace to the next.
	Orig netip.AddrPort
}

func (p Packet) String() string {
	path := "in"
	if p.FromHost {
		path = "host"
	}
	st := p.State
	if st == "" {
		st = StateNew
	}
	if p.Proto == ICMP {
		return fmt.Sprintf("%s %s %s -> %s (%s)", path, p.Proto, p.Src.Addr(), p.Dst.Addr(), st)
	}
	return fmt.Sprintf("%s %s %s -> %s (%s)", path, p.Proto, p.Src, p.Dst, st)
}

// Node is what the kernel knows of the node beyond the two tables.
type Node struct {
	// Local lists every address of the node: its node IPs, the addresses
	// on kube-ipvs0 (the plan's ClusterIP, external and load balancer
	// addresses), and any other (a bridge's pod-network address). fib
	// daddr type local and the routing decision read it.
	Local []netip.Addr
	// Routes are the node's routes, for the interfaces rules read: an
	// inbound packet's input interface (Packet.InIface), meta oifname
	// and fib daddr oifname. A destination no route holds has no
	// interface (an empty name).
	Routes []Route
}

// Action is what finally happens to a packet.
type Action string

// Actions.
const (
	Deliver        Action = "deliver"          // to a socket on this node
	Send           Action = "send"             // routed on: to a pod, another node, the network
	Drop           Action = "drop"             // dropped silently
	RejectTCPReset Action = "reject-tcp-reset" // dropped, a TCP reset sent back
	RejectICMP     Action = "reject-icmp"      // dropped, an ICMP(v6) error sent back (ICMPCode)
)

// RuleRef names one rule of the table.
type RuleRef struct {
	Chain string
	// Index is the rule's position in its chain, from 0.
	Index int
	// Number is its number among the chain's rules that apply to its
	// family (those of the other family, with a different meta nfproto
	// test, are skipped), from 1: nft/README.md's numbering, the same for
	// IPv4 and IPv6 rules, written "chain#n".
	Number int
}

func (r RuleRef) String() string { return fmt.Sprintf("%s#%d", r.Chain, r.Number) }

// Rewrite is one destination NAT.
type Rewrite struct {
	By string // a rule ("nat-prerouting#3") or "ipvs"
	To netip.AddrPort
}

// Result is the outcome of a trace.
type Result struct {
	Action Action
	// By names what decided a drop or reject: a rule, or "ipvs" (a
	// virtual server without destinations).
	By string
	// ICMPCode is the ICMPX code of a RejectICMP ("port-unreachable").
	ICMPCode string
	// NoTrack says a notrack statement took the packet out of conntrack.
	NoTrack bool
	// Masquerade is why the packet's source was masqueraded: "mark" (the
	// rule tests the masquerade mark) or the base name of the set the
	// rule looks the packet up in ("hairpin"); empty when it was not.
	Masquerade   string
	MasqueradeBy string // the rule that masqueraded
	FullyRandom  bool
	// DNAT lists the destination rewrites in order.
	DNAT []Rewrite
	// Dst is the destination at the end: after every DNAT.
	Dst netip.AddrPort
	// Mark is the packet mark at the end (meta mark).
	Mark uint32
	// CtMark is the conntrack mark of the packet's connection at the end
	// (ct mark); 0 for an untracked packet.
	CtMark uint32
	// Matched lists the rules that matched, in order: a rule matches when
	// all its expressions ran without one breaking (a failed comparison or
	// lookup). A rule may appear twice: hooks run again for a packet IPVS
	// sends on, or the host sends to itself.
	Matched []RuleRef
	// Steps is a readable log of the walk, for test failures.
	Steps []string
}

// Summary renders the verdict in one line, with addresses renamed by
// name (those missing from it are printed as they are): "send notrack
// masq=mark dnat=ipvs>pod-c:8080"; a packet leaving unmasqueraded with a
// mark says so ("send marked=0x4000").
func (r *Result) Summary(name func(netip.Addr) string) string {
	if name == nil {
		name = netip.Addr.String
	}
	parts := []string{string(r.Action)}
	if r.ICMPCode != "" {
		parts[0] += "(" + r.ICMPCode + ")"
	}
	if r.NoTrack {
		parts = append(parts, "notrack")
	}
	if r.Masquerade != "" {
		parts = append(parts, "masq="+r.Masquerade)
	}
	if r.Action == Send && r.Masquerade == "" && r.Mark != 0 {
		parts = append(parts, fmt.Sprintf("marked=%#x", r.Mark))
	}
	if len(r.DNAT) > 0 {
		var d []string
		for _, rw := range r.DNAT {
			d = append(d, fmt.Sprintf("%s>%s:%d", rw.By, name(rw.To.Addr()), rw.To.Port()))
		}
		parts = append(parts, "dnat="+strings.Join(d, ","))
	}
	return strings.Join(parts, " ")
}

// MatchedRule reports whether the rule "chain#n" matched.
func (r *Result) MatchedRule(ref string) bool {
	for _, m := range r.Matched {
		if m.String() == ref {
			return true
		}
	}
	return false
}
