package ipvsnl

import (
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Requests. The change requests go to the kernel in batches (conn_linux.go):
// they are encoded here, not by github.com/moby/ipvs, which builds and
// sends one request per call and waits for its answer. Generic netlink
// processes every message of one sendmsg in turn, so a batch of them
// costs one system call where moby pays a round trip per change.

// genlHeader is a generic netlink header: command, version, reserved.
func genlHeader(cmd uint8) []byte { return []byte{cmd, ipvsGenlVersion, 0, 0} }

// startKeyAttr appends an IPVS_CMD_ATTR_SERVICE holding virtual server
// k's key (family, protocol, address, port), all a request about an
// existing virtual server needs, and leaves it open: a request that adds
// or changes one appends its other attributes, and attrEnd(b, at) closes
// it.
func startKeyAttr(b []byte, k Key, proto uint16) (_ []byte, at int) {
	at = len(b)
	b = attrStart(b, nlaNested|ipvsCmdAttrService)
	b = attrUint16(b, ipvsSvcAttrAF, family(k.Address))
	b = attrUint16(b, ipvsSvcAttrProtocol, proto)
	b = attrAddr(b, ipvsSvcAttrAddr, k.Address)
	return attrPort(b, ipvsSvcAttrPort, k.Port), at
}

// opCommands is the IPVS command of each op kind.
var opCommands = [...]uint8{
	OpAddService: ipvsCmdNewService, OpUpdateService: ipvsCmdSetService, OpDeleteService: ipvsCmdDelService,
	OpAddDestination: ipvsCmdNewDest, OpUpdateDestination: ipvsCmdSetDest, OpDeleteDestination: ipvsCmdDelDest,
}

// encodeOp returns the body of op's request: the generic netlink header
// and its attributes. The kernel needs the whole virtual server (scheduler,
// flags, timeout, netmask) only to add or change one, and the whole
// destination (forwarding method, weight, thresholds) only to add or change
// one; a key is enough for the rest, so those requests carry only their
// key and more of them fit in one batch.
func encodeOp(o Op) ([]byte, error) { return appendOp(nil, o) }

// appendOp appends op's request body (encodeOp) to b. A Write appends
// every change of its batch to one buffer: a cold start sends one
// request per virtual server and destination of the table, and an
// attribute encoder that allocates every attribute and nest would make
// the encoding the largest allocation of the cold start. The bytes are
// mdlayher/netlink's AttributeEncoder's (encode_test.go).
func appendOp(b []byte, o Op) ([]byte, error) {
	if int(o.Kind) >= len(opCommands) || opCommands[o.Kind] == 0 {
		return b, fmt.Errorf("%s: unknown op kind", o)
	}
	k := o.VS.Key
	proto, ok := k.Protocol.Number()
	if !ok || !k.Address.IsValid() {
		return b, fmt.Errorf("%s: virtual server not one IPVS can hold", o)
	}
	d := o.Dest
	if o.Kind >= OpAddDestination && !d.Addr.IsValid() {
		return b, fmt.Errorf("%s: invalid destination address", o)
	}
	if len(o.VS.Scheduler) > math.MaxUint16-64 {
		// Its attribute's length would not fit in the header: the
		// kernel would read the batch's next requests as its rest.
		return b, fmt.Errorf("encode %s: scheduler name of %d bytes", o, len(o.VS.Scheduler))
	}
	b = append(b, opCommands[o.Kind], ipvsGenlVersion, 0, 0)
	b, svc := startKeyAttr(b, k, uint16(proto))
	if o.Kind == OpAddService || o.Kind == OpUpdateService {
		at := len(b)
		b = append(attrStart(b, ipvsSvcAttrSchedName), o.VS.Scheduler...)
		b = attrEnd(append(b, 0), at) // NUL-terminated
		// The mask says which flags to set: all of them, so that an
		// update clears the flags the virtual server no longer has.
		at = len(b)
		b = binary.NativeEndian.AppendUint32(attrStart(b, ipvsSvcAttrFlags), o.VS.Flags)
		b = attrEnd(binary.NativeEndian.AppendUint32(b, 0xffffffff), at)
		b = attrUint32(b, ipvsSvcAttrTimeout, o.VS.Timeout)
		b = attrUint32(b, ipvsSvcAttrNetmask, netmask(k))
	}
	b = attrEnd(b, svc)
	if o.Kind >= OpAddDestination {
		dest := len(b)
		b = attrStart(b, nlaNested|ipvsCmdAttrDest)
		b = attrAddr(b, ipvsDestAttrAddr, d.Addr)
		b = attrPort(b, ipvsDestAttrPort, d.Port)
		if o.Kind != OpDeleteDestination {
			b = attrUint32(b, ipvsDestAttrFwdMethod, uint32(d.Forward)&fwdMethodMask)
			b = attrUint32(b, ipvsDestAttrWeight, uint32(d.Weight)) // the kernel refuses a negative one (ERANGE)
			b = attrUint32(b, ipvsDestAttrUThresh, 0)
			b = attrUint32(b, ipvsDestAttrLThresh, 0)
		}
		b = attrEnd(b, dest)
	}
	return b, nil
}

// opBodyBytes is about the size of a change's request body (a
// destination's add is 88 bytes), to size a Write's buffer.
const opBodyBytes = 96

// Netlink attributes appended in place: a header (length, type), the
// value, and zeros up to a multiple of 4 bytes. A nested attribute's
// length, its header's and its attributes', is written once they are in
// (attrEnd).
const nlaNested = 0x8000 // NLA_F_NESTED

// attrStart appends an attribute's header of type typ; attrEnd sets its
// length.
func attrStart(b []byte, typ uint16) []byte {
	return binary.NativeEndian.AppendUint16(binary.NativeEndian.AppendUint16(b, 0), typ)
}

// attrEnd sets the length of the attribute whose header is at b[at:],
// its value being the rest of b, and pads it.
func attrEnd(b []byte, at int) []byte {
	binary.NativeEndian.PutUint16(b[at:], uint16(len(b)-at))
	for (len(b)-at)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func attrUint16(b []byte, typ, v uint16) []byte {
	at := len(b)
	return attrEnd(binary.NativeEndian.AppendUint16(attrStart(b, typ), v), at)
}

func attrUint32(b []byte, typ uint16, v uint32) []byte {
	at := len(b)
	return attrEnd(binary.NativeEndian.AppendUint32(attrStart(b, typ), v), at)
}

// attrPort appends a port, in network order.
func attrPort(b []byte, typ, port uint16) []byte {
	at := len(b)
	return attrEnd(binary.BigEndian.AppendUint16(attrStart(b, typ), port), at)
}

// attrAddr appends an address: 4 bytes for IPv4, 16 for IPv6.
func attrAddr(b []byte, typ uint16, a netip.Addr) []byte {
	at := len(b)
	b = attrStart(b, typ)
	if a.Is4() {
		v := a.As4()
		return attrEnd(append(b, v[:]...), at)
	}
	v := a.As16()
	return attrEnd(append(b, v[:]...), at)
}

// netmask is kube-proxy's persistence netmask: the whole address, /32 as
// a mask in IPv4 and a prefix length in IPv6 (the kernel refuses an IPv6
// one outside 1..128).
func netmask(k Key) uint32 {
	if k.Address.Is4() {
		return 0xffffffff
	}
	return 128
}

// appendDestinationsRequest appends the body (generic netlink header
// and attributes) of the dump of virtual server k's destinations to b.
func appendDestinationsRequest(b []byte, k Key) ([]byte, error) {
	return appendKeyRequest(b, ipvsCmdGetDest, k, "destinations request")
}

// getServicesRequest is the body of the dump: a generic netlink header
// alone.
func getServicesRequest() []byte { return genlHeader(ipvsCmdGetService) }

// appendServiceRequest appends the body of the read of virtual server k
// alone (IPVS_CMD_GET_SERVICE without NLM_F_DUMP) to b: the kernel
// answers with the one virtual server, or ESRCH.
func appendServiceRequest(b []byte, k Key) ([]byte, error) {
	return appendKeyRequest(b, ipvsCmdGetService, k, "read")
}

// appendKeyRequest appends the body of command cmd about virtual server
// k alone to b: the generic netlink header and k's key attribute. A
// Repair reads every virtual server's destinations, one request each,
// into one reused buffer. what names the request in errors.
func appendKeyRequest(b []byte, cmd uint8, k Key, what string) ([]byte, error) {
	proto, ok := k.Protocol.Number()
	if !ok || !k.Address.IsValid() {
		return b, fmt.Errorf("%s of virtual server %s: not one IPVS can hold", what, k)
	}
	b, at := startKeyAttr(append(b, cmd, ipvsGenlVersion, 0, 0), k, uint16(proto))
	return attrEnd(b, at), nil
}

// getConfigRequest is the body of the timeouts' read.
func getConfigRequest() []byte { return genlHeader(ipvsCmdGetConfig) }

// setConfigRequest is the body of the timeouts' change. The kernel
// changes only the non-zero ones (ip_vs_set_timeout), which is
// Kernel.SetTimeouts' contract; a timeout is sent in whole seconds.
func setConfigRequest(t Timeouts) ([]byte, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(ipvsCmdAttrTimeoutTCP, seconds(t.TCP))
	ae.Uint32(ipvsCmdAttrTimeoutTCPFin, seconds(t.TCPFin))
	ae.Uint32(ipvsCmdAttrTimeoutUDP, seconds(t.UDP))
	attrs, err := ae.Encode()
	if err != nil {
		return nil, fmt.Errorf("encode the IPVS timeouts %+v: %w", t, err)
	}
	return append(genlHeader(ipvsCmdSetConfig), attrs...), nil
}

func seconds(d time.Duration) uint32 { return uint32(d / time.Second) }

// family is the address family of a.
func family(a netip.Addr) uint16 {
	if a.Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}
