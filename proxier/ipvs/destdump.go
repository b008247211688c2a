package ipvs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlattr"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlsock"
)

// The IPVS generic netlink request that lists one virtual server's
// destinations (include/uapi/linux/ip_vs.h), made by dumpReader. It is
// the request moby/ipvs's GetDestinations makes; the reader differs in
// how it reads the answer and what it does with it. It reads on a
// blocking socket into one buffer it keeps, where moby's read
// (vishvananda/netlink's Receive) zeroes a 64 KiB buffer on its stack
// per read and copies the answer out of it, and it decodes only the
// attributes a Destination holds. A Repair lists every virtual server,
// and on a large node moby's read and decode, not the kernel, dominated
// each list (benchmarks/NOTES.md). The socket blocks in the read, as moby's
// does: on a socket on Go's network poller (mdlayher/netlink's, which
// this reader used first) the goroutine parked in its reads, and a read
// was slower than moby's (benchmarks/NOTES.md).
const (
	ipvsGenlName    = "IPVS"
	ipvsGenlVersion = 1
	ipvsCmdGetDest  = 8 // IPVS_CMD_GET_DEST

	ipvsCmdAttrService = 1 // IPVS_CMD_ATTR_SERVICE
	ipvsCmdAttrDest    = 2 // IPVS_CMD_ATTR_DEST

	ipvsSvcAttrAF       = 1 // IPVS_SVC_ATTR_AF
	ipvsSvcAttrProtocol = 2 // IPVS_SVC_ATTR_PROTOCOL
	ipvsSvcAttrAddr     = 3 // IPVS_SVC_ATTR_ADDR
	ipvsSvcAttrPort     = 4 // IPVS_SVC_ATTR_PORT

	ipvsDestAttrAddr        = 1  // IPVS_DEST_ATTR_ADDR
	ipvsDestAttrPort        = 2  // IPVS_DEST_ATTR_PORT, network order
	ipvsDestAttrFwdMethod   = 3  // IPVS_DEST_ATTR_FWD_METHOD
	ipvsDestAttrWeight      = 4  // IPVS_DEST_ATTR_WEIGHT
	ipvsDestAttrActiveConns = 7  // IPVS_DEST_ATTR_ACTIVE_CONNS
	ipvsDestAttrInactConns  = 8  // IPVS_DEST_ATTR_INACT_CONNS
	ipvsDestAttrAddrFamily  = 11 // IPVS_DEST_ATTR_ADDR_FAMILY

	fwdMethodMask = 0x7 // IP_VS_CONN_F_FWD_MASK
)

// genlHeader is a generic netlink header: command, version, reserved.
func genlHeader(cmd uint8) []byte { return []byte{cmd, ipvsGenlVersion, 0, 0} }

// getDestinationsRequest is the body (generic netlink header and
// attributes) of the dump of virtual server k's destinations.
func getDestinationsRequest(k Key) ([]byte, error) {
	proto, ok := k.Protocol.Number()
	if !ok || !k.Address.IsValid() {
		return nil, fmt.Errorf("virtual server %s: not one IPVS can list", k)
	}
	attrs, err := keyAttrs(k, uint16(proto))
	if err != nil {
		return nil, fmt.Errorf("encode the destinations request of %s: %w", k, err)
	}
	return append(genlHeader(ipvsCmdGetDest), attrs...), nil
}

// keyAttrs encodes virtual server k's key (family, protocol, address,
// port) as an IPVS_CMD_ATTR_SERVICE, all a request about an existing
// virtual server needs.
func keyAttrs(k Key, proto uint16) ([]byte, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Nested(ipvsCmdAttrService, func(nae *netlink.AttributeEncoder) error {
		nae.Uint16(ipvsSvcAttrAF, family(k.Address))
		nae.Uint16(ipvsSvcAttrProtocol, proto)
		nae.Bytes(ipvsSvcAttrAddr, k.Address.AsSlice())
		nae.Bytes(ipvsSvcAttrPort, binary.BigEndian.AppendUint16(nil, k.Port))
		return nil
	})
	return ae.Encode()
}

// errDumpInterrupted: the kernel marked a message of a dump as
// interrupted (NLM_F_DUMP_INTR, on the message where it saw the state
// change, and on newer kernels the DONE too); what it listed may miss or
// repeat entries.
var errDumpInterrupted = errors.New("netlink dump interrupted")

// splitAnswer splits what one read of a netlink socket returned into
// the messages answering request seq. It reports done when the answer
// is complete: a dump's NLMSG_DONE, an acknowledgement, or a message
// that is not part of a multi-part answer. An NLMSG_ERROR, or a DONE
// that carries one, is returned as the errno it holds, and any message
// marked interrupted as errDumpInterrupted. Messages of another sequence number
// are left over from an earlier request that ended in an error, and are
// skipped. The messages, whose Data point into b, are appended to msgs,
// which a reader reuses from read to read.
func splitAnswer(msgs []netlink.Message, b []byte, seq uint32) (_ []netlink.Message, done bool, err error) {
	for len(b) > 0 {
		var m nlsock.Message
		if m, b, err = nlsock.Split(b); err != nil {
			return nil, false, err
		}
		if m.Seq != seq {
			continue
		}
		if m.Flags&unix.NLM_F_DUMP_INTR != 0 {
			return nil, false, errDumpInterrupted
		}
		if m.Type == unix.NLMSG_OVERRUN {
			return nil, false, errors.New("netlink answer: the kernel reports an overrun")
		}
		if ends, kernelErr, err := m.Ends(); ends {
			if err != nil {
				return nil, false, err
			}
			if kernelErr != nil {
				return nil, false, kernelErr
			}
			return msgs, true, nil
		}
		if m.Type == unix.NLMSG_NOOP {
			continue
		}
		msgs = append(msgs, netlink.Message{
			Header: netlink.Header{Length: uint32(unix.NLMSG_HDRLEN + len(m.Body)), Type: netlink.HeaderType(m.Type),
				Flags: netlink.HeaderFlags(m.Flags), Sequence: m.Seq},
			Data: m.Body,
		})
		if m.Flags&unix.NLM_F_MULTI == 0 {
			return msgs, true, nil
		}
	}
	return msgs, false, nil
}

// parseDestinations decodes the answer to getDestinationsRequest: one
// message per destination, each a generic netlink header and an
// IPVS_CMD_ATTR_DEST holding the destination's attributes. A destination
// without a family is of the virtual server's (kernels before 4.19 do
// not send it). Anything malformed is an error, never a panic.
func parseDestinations(msgs []netlink.Message, vsFamily uint16) ([]Destination, error) {
	out := make([]Destination, 0, len(msgs))
	for i, m := range msgs {
		if len(m.Data) < 4 {
			return nil, fmt.Errorf("destination message %d: %d bytes, shorter than its generic netlink header", i, len(m.Data))
		}
		found := false
		aw := nlattr.New(m.Data[4:])
		for aw.Next() {
			if aw.Type != ipvsCmdAttrDest {
				continue
			}
			d, err := decodeDestination(nlattr.New(aw.Data), vsFamily)
			if err != nil {
				return nil, fmt.Errorf("destination message %d: %w", i, err)
			}
			out = append(out, d)
			found = true
		}
		if aw.Err != nil {
			return nil, fmt.Errorf("destination message %d: %w", i, aw.Err)
		}
		if !found {
			return nil, fmt.Errorf("destination message %d: no destination attribute", i)
		}
	}
	return out, nil
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
