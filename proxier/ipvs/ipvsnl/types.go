package ipvsnl

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// The kernel's IPVS objects as the codec reads and writes them. Package
// ipvs names them too (type aliases), so that the writer, its fakes and
// this codec speak of one type each.

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

// ErrUnanswered wraps the error of an op whose request was sent but
// whose answer never came (the socket failed or timed out): the kernel
// may or may not have made the change, so the whole data plane is
// unknown.
var ErrUnanswered = errors.New("the kernel's answer was lost")
