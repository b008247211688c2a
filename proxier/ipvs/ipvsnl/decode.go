package ipvsnl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlattr"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// Answers. The dumps of virtual servers and destinations are the
// requests moby/ipvs's GetServices and GetDestinations make; they are
// read differently. The socket (socket_linux.go) reads into one buffer
// it keeps, where moby's read (vishvananda/netlink's Receive) zeroes a
// 64 KiB buffer on its stack per read and copies the answer out of it,
// and the answer is decoded here in place (internal/nlattr), only the
// attributes a VirtualServer or Destination holds: moby decodes each
// virtual server's statistics too, copying every attribute. A Repair
// lists the whole table, and on a large node moby's read and decode,
// not the kernel, dominated it (benchmarks/NOTES.md).

// parseVirtualServers decodes one read of the dump's answer, appending
// to out: one message per virtual server, each a generic netlink header
// and an IPVS_CMD_ATTR_SERVICE holding its attributes. Those the Kernel
// never lists (a firewall mark's, or of a protocol other than TCP, UDP
// or SCTP) are skipped, as moby's adapter skipped them. Anything
// malformed is an error, never a panic.
func parseVirtualServers(msgs []netlink.Message, out []VirtualServer) ([]VirtualServer, error) {
	err := eachNested(msgs, ipvsCmdAttrService, "virtual server", "service", func(aw nlattr.Walk) error {
		vs, ours, err := decodeVirtualServer(aw)
		if err == nil && ours {
			out = append(out, vs)
		}
		return err
	})
	return out, err
}

// eachNested calls fn with the attributes nested in each message's
// attribute of type typ, after the generic netlink header: the dumps'
// answers hold one object each. what names the messages in errors and
// attr the attribute a message without one misses.
func eachNested(msgs []netlink.Message, typ uint16, what, attr string, fn func(nlattr.Walk) error) error {
	for i, m := range msgs {
		if len(m.Data) < 4 {
			return fmt.Errorf("%s message %d: %d bytes, shorter than its generic netlink header", what, i, len(m.Data))
		}
		found := false
		aw := nlattr.New(m.Data[4:])
		for aw.Next() {
			if aw.Type != typ {
				continue
			}
			found = true
			if err := fn(nlattr.New(aw.Data)); err != nil {
				return fmt.Errorf("%s message %d: %w", what, i, err)
			}
		}
		if aw.Err != nil {
			return fmt.Errorf("%s message %d: %w", what, i, aw.Err)
		}
		if !found {
			return fmt.Errorf("%s message %d: no %s attribute", what, i, attr)
		}
	}
	return nil
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

// parseDestinations decodes one read of the answer to
// appendDestinationsRequest, appending to out: one message per
// destination, each a generic netlink header and an IPVS_CMD_ATTR_DEST
// holding the destination's attributes. A destination without a family
// is of the virtual server's (kernels before 4.19 do not send it).
// Anything malformed is an error, never a panic.
func parseDestinations(msgs []netlink.Message, vsFamily uint16, out []Destination) ([]Destination, error) {
	err := eachNested(msgs, ipvsCmdAttrDest, "destination", "destination", func(aw nlattr.Walk) error {
		d, err := decodeDestination(aw, vsFamily)
		if err == nil {
			out = append(out, d)
		}
		return err
	})
	return out, err
}

// decodeDestination decodes one IPVS_CMD_ATTR_DEST's attributes.
func decodeDestination(aw nlattr.Walk, vsFamily uint16) (Destination, error) {
	var d Destination
	var raw []byte
	af := vsFamily
	havePort := false
	for aw.Next() {
		switch aw.Type {
		case ipvsDestAttrAddr:
			raw = aw.Data
		case ipvsDestAttrPort:
			if len(aw.Data) != 2 {
				return d, fmt.Errorf("destination port of %d bytes", len(aw.Data))
			}
			d.Port, havePort = binary.BigEndian.Uint16(aw.Data), true
		case ipvsDestAttrFwdMethod:
			d.Forward = uint16(aw.Uint32() & fwdMethodMask)
		case ipvsDestAttrWeight:
			d.Weight = int32(aw.Uint32())
		case ipvsDestAttrActiveConns:
			d.ActiveConns = aw.Uint32()
		case ipvsDestAttrInactConns:
			d.InactiveConns = aw.Uint32()
		case ipvsDestAttrAddrFamily:
			af = aw.Uint16()
		}
	}
	if aw.Err != nil {
		return d, aw.Err
	}
	switch {
	case af == unix.AF_INET && len(raw) >= 4:
		d.Addr = netip.AddrFrom4([4]byte(raw[:4]))
	case af == unix.AF_INET6 && len(raw) >= 16:
		d.Addr = netip.AddrFrom16([16]byte(raw[:16]))
	default:
		return d, fmt.Errorf("destination address of %d bytes in family %d", len(raw), af)
	}
	if !havePort {
		return d, errors.New("destination without a port")
	}
	return d, nil
}

// parseTimeouts decodes the answer to getConfigRequest: one message of
// the three timeouts in seconds. Anything malformed is an error, never
// a panic.
func parseTimeouts(msgs []netlink.Message) (Timeouts, error) {
	if len(msgs) != 1 {
		return Timeouts{}, fmt.Errorf("IPVS timeouts: %d messages in the answer, want 1", len(msgs))
	}
	data := msgs[0].Data
	if len(data) < 4 {
		return Timeouts{}, fmt.Errorf("IPVS timeouts: %d bytes, shorter than the generic netlink header", len(data))
	}
	var t Timeouts
	aw := nlattr.New(data[4:])
	for aw.Next() {
		switch aw.Type {
		case ipvsCmdAttrTimeoutTCP:
			t.TCP = time.Duration(aw.Uint32()) * time.Second
		case ipvsCmdAttrTimeoutTCPFin:
			t.TCPFin = time.Duration(aw.Uint32()) * time.Second
		case ipvsCmdAttrTimeoutUDP:
			t.UDP = time.Duration(aw.Uint32()) * time.Second
		}
	}
	if aw.Err != nil {
		return Timeouts{}, fmt.Errorf("IPVS timeouts: %w", aw.Err)
	}
	return t, nil
}
