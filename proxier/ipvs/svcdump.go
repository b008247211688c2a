package ipvs

import (
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlattr"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// The dump of every virtual server (IPVS_CMD_GET_SERVICE with
// NLM_F_DUMP), the request moby/ipvs's GetServices makes. dumpReader
// makes it on its own socket for the reason it lists destinations
// there (destdump.go), and more: moby decodes each virtual server's
// statistics too, copying every attribute, and a Repair dumps the whole
// table; on a large node that decoding was among the largest
// allocations of a quiet proxy (benchmarks/NOTES.md). Here the answer is
// decoded in place and the statistics are skipped.
const (
	ipvsCmdGetService = 4 // IPVS_CMD_GET_SERVICE
	ipvsSvcAttrFWMark = 5 // IPVS_SVC_ATTR_FWMARK
)

// getServicesRequest is the body of the dump: a generic netlink header
// alone.
func getServicesRequest() []byte { return genlHeader(ipvsCmdGetService) }

// parseVirtualServers decodes one read of the dump's answer, appending
// to out: one message per virtual server, each a generic netlink header
// and an IPVS_CMD_ATTR_SERVICE holding its attributes. Those the Kernel
// never lists (a firewall mark's, or of a protocol other than TCP, UDP
// or SCTP) are skipped, as moby's adapter skipped them. Anything
// malformed is an error, never a panic.
func parseVirtualServers(msgs []netlink.Message, out []VirtualServer) ([]VirtualServer, error) {
	for i, m := range msgs {
		if len(m.Data) < 4 {
			return out, fmt.Errorf("virtual server message %d: %d bytes, shorter than its generic netlink header", i, len(m.Data))
		}
		found := false
		aw := nlattr.New(m.Data[4:])
		for aw.Next() {
			if aw.Type != ipvsCmdAttrService {
				continue
			}
			found = true
			vs, ours, err := decodeVirtualServer(nlattr.New(aw.Data))
			if err != nil {
				return out, fmt.Errorf("virtual server message %d: %w", i, err)
			}
			if ours {
				out = append(out, vs)
			}
		}
		if aw.Err != nil {
			return out, fmt.Errorf("virtual server message %d: %w", i, aw.Err)
		}
		if !found {
			return out, fmt.Errorf("virtual server message %d: no service attribute", i)
		}
	}
	return out, nil
}

// decodeVirtualServer decodes one IPVS_CMD_ATTR_SERVICE's attributes;
// false for a virtual server the Kernel does not list. FLAGS is a
// struct ip_vs_flags (flags, then mask) of which the flags are read;
// the scheduler's name is NUL-terminated.
func decodeVirtualServer(aw nlattr.Walk) (vs VirtualServer, ours bool, err error) {
	var raw []byte
	var af, proto uint16
	var fwmark uint32
	havePort := false
	for aw.Next() {
		switch aw.Type {
		case ipvsSvcAttrAF:
			af = aw.Uint16()
		case ipvsSvcAttrProtocol:
			proto = aw.Uint16()
		case ipvsSvcAttrAddr:
			raw = aw.Data
		case ipvsSvcAttrPort:
			if len(aw.Data) != 2 {
				return vs, false, fmt.Errorf("virtual server port of %d bytes", len(aw.Data))
			}
			vs.Port, havePort = binary.BigEndian.Uint16(aw.Data), true
		case ipvsSvcAttrFWMark:
			fwmark = aw.Uint32()
		case ipvsSvcAttrSchedName:
			vs.Scheduler = schedulerName(aw.Data)
		case ipvsSvcAttrFlags:
			if len(aw.Data) < 4 {
				return vs, false, fmt.Errorf("virtual server flags of %d bytes", len(aw.Data))
			}
			vs.Flags = binary.NativeEndian.Uint32(aw.Data[:4]) &^ FlagHashed
		case ipvsSvcAttrTimeout:
			vs.Timeout = aw.Uint32()
		}
	}
	if aw.Err != nil {
		return vs, false, aw.Err
	}
	if fwmark != 0 {
		return vs, false, nil
	}
	p, known := protocolOf(proto)
	if !known {
		return vs, false, nil
	}
	switch {
	case af == unix.AF_INET && len(raw) >= 4:
		vs.Address = netip.AddrFrom4([4]byte(raw[:4]))
	case af == unix.AF_INET6 && len(raw) >= 16:
		vs.Address = netip.AddrFrom16([16]byte(raw[:16])).Unmap()
	default:
		return vs, false, fmt.Errorf("virtual server address of %d bytes in family %d", len(raw), af)
	}
	if !havePort {
		return vs, false, fmt.Errorf("virtual server %s without a port", vs.Address)
	}
	vs.Protocol = p
	return vs, true, nil
}

// protocolOf is the protocol of an IPVS service's protocol number; false
// for one that is not TCP, UDP or SCTP.
func protocolOf(n uint16) (policy.Protocol, bool) {
	if n > math.MaxUint8 {
		return "", false
	}
	return policy.ProtocolOfNumber(uint8(n))
}

// knownSchedulers are the kernel's IPVS schedulers: a name read back is
// one of these strings, not a new one per virtual server per dump.
var knownSchedulers = []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "fo", "ovf", "mh", "twos", "none"}

// schedulerName is b up to its first NUL, as a string.
func schedulerName(b []byte) string {
	for i, c := range b {
		if c == 0 {
			b = b[:i]
			break
		}
	}
	for _, s := range knownSchedulers {
		if s == string(b) {
			return s
		}
	}
	return string(b)
}
