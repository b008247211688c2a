package ipvs

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// IPVS service flags (include/uapi/linux/ip_vs.h).
const (
	FlagPersistent = 0x0001 // IP_VS_SVC_F_PERSISTENT: session affinity
	FlagHashed     = 0x0002 // IP_VS_SVC_F_HASHED: set by the kernel, never by us
	FlagOnePacket  = 0x0004 // IP_VS_SVC_F_ONEPACKET
	FlagSched1     = 0x0008 // IP_VS_SVC_F_SCHED1: mh-fallback, sh-fallback
	FlagSched2     = 0x0010 // IP_VS_SVC_F_SCHED2: mh-port, sh-port
	FlagSched3     = 0x0020 // IP_VS_SVC_F_SCHED3
)

// ForwardMasq is the NAT (masquerade) forwarding method of a destination,
// IP_VS_CONN_F_MASQ; the only one the Writer programs.
const ForwardMasq = 0

// Key identifies a virtual server in the kernel: the plan's key, so that
// the plan, both writers and the kernel adapters speak of virtual servers
// in one type.
type Key = policy.VirtualServerKey

// VirtualServer is an IPVS virtual server as the Writer programs it.
// Flags never include FlagHashed: adapters strip it when reading.
type VirtualServer struct {
	Key
	Scheduler string
	Flags     uint32
	// Timeout is the persistence timeout in seconds (0 without FlagPersistent).
	Timeout uint32
}

func (vs VirtualServer) String() string {
	return fmt.Sprintf("%s %s flags=%#x timeout=%d", vs.Key, vs.Scheduler, vs.Flags, vs.Timeout)
}

// Destination is a real server of a virtual server. ActiveConns and
// InactiveConns are read from the kernel and ignored when writing. The
// fields are the kernel's widths (weight s32, connection counts u32, a
// forwarding method of three bits), so that a destination is small: the
// Writer holds two per destination, desired and mirrored (benchmarks/NOTES.md,
// memory).
type Destination struct {
	Addr          netip.Addr
	Port          uint16
	Forward       uint16 // forwarding method; ForwardMasq
	Weight        int32
	ActiveConns   uint32
	InactiveConns uint32
}

// AddrPort is the destination's identity within its virtual server.
func (d Destination) AddrPort() netip.AddrPort { return netip.AddrPortFrom(d.Addr, d.Port) }

// Timeouts are the IPVS connection timeouts; zero means unchanged.
type Timeouts struct{ TCP, TCPFin, UDP time.Duration }

// Kernel is the IPVS part of the kernel. Errors are the kernel's: adding
// what exists is EEXIST, changing or deleting a missing virtual server is
// ESRCH, a missing destination ENOENT.
type Kernel interface {
	// VirtualServers lists every address-based virtual server (firewall
	// mark services are not listed); empty when there are none.
	VirtualServers() ([]VirtualServer, error)
	// VirtualServer reads one virtual server: ESRCH if it does not exist.
	VirtualServer(k Key) (VirtualServer, error)
	// Destinations lists a virtual server's destinations with their
	// connection counts; empty (no error) when the virtual server is missing.
	Destinations(k Key) ([]Destination, error)
	// DestinationCounts counts the destinations of every address-based
	// virtual server in one read; a virtual server without any counts 0.
	// The map is valid until the next call, which may refill it.
	DestinationCounts() (map[Key]int, error)
	AddVirtualServer(vs VirtualServer) error
	UpdateVirtualServer(vs VirtualServer) error
	DeleteVirtualServer(k Key) error
	AddDestination(k Key, d Destination) error
	UpdateDestination(k Key, d Destination) error
	DeleteDestination(k Key, d Destination) error
	Timeouts() (Timeouts, error)
	// SetTimeouts changes the non-zero timeouts.
	SetTimeouts(t Timeouts) error
	// Write makes the changes ops in order, each as its single-change
	// method above would: an op sees the kernel as the ops before it
	// left it, and a failing op stops none of the later ones. It returns
	// one error per op, nil for those that succeeded; an op whose answer
	// was lost (the socket failed) has an error wrapping ErrUnanswered.
	// Empty ops is nothing to do.
	Write(ops []Op) []error
}

// OpKind is the kind of one IPVS change.
type OpKind uint8

// The IPVS changes of Kernel.Write, one per single-change method.
const (
	OpAddService OpKind = iota + 1
	OpUpdateService
	OpDeleteService
	OpAddDestination
	OpUpdateDestination
	OpDeleteDestination
)

var opNames = [...]string{
	OpAddService: "add-service", OpUpdateService: "update-service", OpDeleteService: "delete-service",
	OpAddDestination: "add-destination", OpUpdateDestination: "update-destination", OpDeleteDestination: "delete-destination",
}

// String is the op kind as Ops counts it ("add-service", ...).
func (k OpKind) String() string {
	if int(k) < len(opNames) && opNames[k] != "" {
		return opNames[k]
	}
	return fmt.Sprintf("op-%d", k)
}

// Op is one IPVS change for Kernel.Write. VS is the whole virtual server
// for OpAddService and OpUpdateService; the other kinds use only its Key.
// Dest is the destination of the destination kinds.
type Op struct {
	Kind OpKind
	VS   VirtualServer
	Dest Destination
}

func (o Op) String() string {
	switch o.Kind {
	case OpAddService, OpUpdateService:
		return o.Kind.String() + " " + o.VS.String()
	case OpDeleteService:
		return o.Kind.String() + " " + o.VS.Key.String()
	}
	return fmt.Sprintf("%s %s %s weight=%d", o.Kind, o.VS.Key, o.Dest.AddrPort(), o.Dest.Weight)
}

// Links is the part of rtnetlink the Writer uses: one dummy interface and
// its addresses. A missing link is ENODEV, an existing link or address
// EEXIST, a missing address EADDRNOTAVAIL.
type Links interface {
	// Link returns a link's index and kind ("dummy", "veth", ...; netlink
	// says "device" for a link without one, such as lo); ENODEV if it
	// does not exist.
	Link(name string) (LinkInfo, error)
	// AddDummy creates a dummy interface (left down, as kube-proxy does)
	// with the alias LinkAlias, which marks it as this proxy's.
	AddDummy(name string) error
	DeleteLink(name string) error
	// Addrs lists the link's addresses, without IPv6 link-local ones.
	// The list is valid until the next call, which may refill it.
	Addrs(name string) ([]netip.Prefix, error)
	AddAddr(name string, p netip.Prefix) error
	DelAddr(name string, p netip.Prefix) error
	// AddAddrs and DelAddrs make many such changes, in order, in as few
	// system calls as they can: a cold start binds an address per
	// service VIP. They return one error per address (nil for done),
	// each as AddAddr or DelAddr would have returned it.
	AddAddrs(name string, ps []netip.Prefix) []error
	DelAddrs(name string, ps []netip.Prefix) []error
}

// LinkInfo is what Links.Link reports of a link.
type LinkInfo struct {
	Index int
	Kind  string
	Alias string // IFLA_IFALIAS; LinkAlias on a link AddDummy created
}

// LinkAlias marks a dummy interface as created by this proxy: the Writer
// manages the addresses of, and Cleanup deletes, only a dummy interface
// with this alias or named DefaultInterface (kube-proxy's name, which a
// kube-proxy being replaced leaves behind without it).
const LinkAlias = "kube-ipvs-proxy"

// Conntrack deletes conntrack entries.
type Conntrack interface {
	// DeleteUDP deletes the UDP entries whose reply source is ep (the
	// endpoint a flow was sent to) and returns how many it deleted.
	DeleteUDP(ep netip.AddrPort) (int, error)
}
