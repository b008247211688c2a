package ipvs

import (
	"fmt"
	"net/netip"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs/ipvsnl"
)

// The kernel's IPVS objects are the codec's (package ipvsnl), named here
// too so that callers speak of ipvs.VirtualServer and ipvs.Op.
type (
	// Key identifies a virtual server in the kernel: the plan's
	// policy.VirtualServerKey.
	Key = ipvsnl.Key
	// VirtualServer is an IPVS virtual server as the Writer programs it.
	VirtualServer = ipvsnl.VirtualServer
	// Destination is a real server of a virtual server.
	Destination = ipvsnl.Destination
	// Timeouts are the IPVS connection timeouts; zero means unchanged.
	Timeouts = ipvsnl.Timeouts
	// Op is one IPVS change for Kernel.Write.
	Op = ipvsnl.Op
	// OpKind is the kind of one IPVS change.
	OpKind = ipvsnl.OpKind
)

// IPVS service flags and the forwarding method (ipvsnl has their
// meaning).
const (
	FlagPersistent = ipvsnl.FlagPersistent
	FlagHashed     = ipvsnl.FlagHashed
	FlagOnePacket  = ipvsnl.FlagOnePacket
	FlagSched1     = ipvsnl.FlagSched1
	FlagSched2     = ipvsnl.FlagSched2
	FlagSched3     = ipvsnl.FlagSched3
	ForwardMasq    = ipvsnl.ForwardMasq
)

// The kinds of IPVS change of Kernel.Write.
const (
	OpAddService        = ipvsnl.OpAddService
	OpUpdateService     = ipvsnl.OpUpdateService
	OpDeleteService     = ipvsnl.OpDeleteService
	OpAddDestination    = ipvsnl.OpAddDestination
	OpUpdateDestination = ipvsnl.OpUpdateDestination
	OpDeleteDestination = ipvsnl.OpDeleteDestination
)

// ErrUnanswered wraps the error of an op that Kernel.Write sent but whose
// answer never came (the socket failed or timed out): the kernel may or
// may not have made the change, so the whole data plane is unknown.
var ErrUnanswered = ipvsnl.ErrUnanswered

// Kernel is the IPVS part of the kernel, as production uses it: reads,
// and changes in batches (a single change is a Write of one). Errors are
// the kernel's: adding what exists is EEXIST, changing or deleting a
// missing virtual server is ESRCH, a missing destination ENOENT.
type Kernel interface {
	// VirtualServers lists every address-based virtual server (firewall
	// mark services are not listed); empty when there are none.
	VirtualServers() ([]VirtualServer, error)
	// VirtualServer reads one virtual server: ESRCH if it does not exist.
	VirtualServer(k Key) (VirtualServer, error)
	// Destinations lists a virtual server's destinations with their
	// connection counts; empty (no error) when the virtual server is missing.
	// The list is valid until the next call, which may refill it: a
	// Repair reads every virtual server's destinations.
	Destinations(k Key) ([]Destination, error)
	// DestinationCounts counts the destinations of every address-based
	// virtual server in one read; a virtual server without any counts 0.
	// The map is valid until the next call, which may refill it.
	DestinationCounts() (map[Key]int, error)
	Timeouts() (Timeouts, error)
	// SetTimeouts changes the non-zero timeouts.
	SetTimeouts(t Timeouts) error
	// Write makes the changes ops in order, each as the kernel makes it
	// alone: an op sees the kernel as the ops before it left it, and a
	// failing op stops none of the later ones. It returns one error per
	// op, nil for those that succeeded; an op whose answer was lost (the
	// socket failed) has an error wrapping ErrUnanswered. Empty ops is
	// nothing to do.
	Write(ops []Op) []error
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

// WriteEach makes the changes ops one request each, a Write of one op
// per change: the baseline that batches are measured against, and the
// contract tests' single changes.
func WriteEach(k Kernel, ops []Op) []error {
	errs := make([]error, len(ops))
	for i, o := range ops {
		errs[i] = writeOne(k, o)
	}
	return errs
}

// writeOne makes one change as a Write of one.
func writeOne(k Kernel, o Op) error {
	if errs := k.Write([]Op{o}); len(errs) == 1 {
		return errs[0]
	}
	return fmt.Errorf("%s: %w: no answer", o, ErrUnanswered)
}
