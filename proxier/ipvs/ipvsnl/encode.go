package ipvsnl

import (
	"encoding/binary"
	"fmt"
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
func encodeOp(o Op) ([]byte, error) {
	if int(o.Kind) >= len(opCommands) || opCommands[o.Kind] == 0 {
		return nil, fmt.Errorf("%s: unknown op kind", o)
	}
	k := o.VS.Key
	proto, ok := k.Protocol.Number()
	if !ok || !k.Address.IsValid() {
		return nil, fmt.Errorf("%s: virtual server not one IPVS can hold", o)
	}
	fullVS := o.Kind == OpAddService || o.Kind == OpUpdateService
	ae := netlink.NewAttributeEncoder()
	ae.Nested(ipvsCmdAttrService, func(nae *netlink.AttributeEncoder) error {
		nae.Uint16(ipvsSvcAttrAF, family(k.Address))
		nae.Uint16(ipvsSvcAttrProtocol, uint16(proto))
		nae.Bytes(ipvsSvcAttrAddr, k.Address.AsSlice())
		nae.Bytes(ipvsSvcAttrPort, binary.BigEndian.AppendUint16(nil, k.Port))
		if fullVS {
			nae.String(ipvsSvcAttrSchedName, o.VS.Scheduler)
			// The mask says which flags to set: all of them, so that an
			// update clears the flags the virtual server no longer has.
			flags := binary.NativeEndian.AppendUint32(nil, o.VS.Flags)
			nae.Bytes(ipvsSvcAttrFlags, binary.NativeEndian.AppendUint32(flags, 0xffffffff))
			nae.Uint32(ipvsSvcAttrTimeout, o.VS.Timeout)
			nae.Uint32(ipvsSvcAttrNetmask, netmask(k))
		}
		return nil
	})
	if o.Kind >= OpAddDestination {
		d := o.Dest
		if !d.Addr.IsValid() {
			return nil, fmt.Errorf("%s: invalid destination address", o)
		}
		fullDest := o.Kind != OpDeleteDestination
		ae.Nested(ipvsCmdAttrDest, func(nae *netlink.AttributeEncoder) error {
			nae.Bytes(ipvsDestAttrAddr, d.Addr.AsSlice())
			nae.Bytes(ipvsDestAttrPort, binary.BigEndian.AppendUint16(nil, d.Port))
			if fullDest {
				nae.Uint32(ipvsDestAttrFwdMethod, uint32(d.Forward)&fwdMethodMask)
				nae.Uint32(ipvsDestAttrWeight, uint32(d.Weight)) // the kernel refuses a negative one (ERANGE)
				nae.Uint32(ipvsDestAttrUThresh, 0)
				nae.Uint32(ipvsDestAttrLThresh, 0)
			}
			return nil
		})
	}
	attrs, err := ae.Encode()
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", o, err)
	}
	return append(genlHeader(opCommands[o.Kind]), attrs...), nil
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

// getDestinationsRequest is the body (generic netlink header and
// attributes) of the dump of virtual server k's destinations.
func getDestinationsRequest(k Key) ([]byte, error) {
	return keyRequest(ipvsCmdGetDest, k, "destinations request")
}

// getServicesRequest is the body of the dump: a generic netlink header
// alone.
func getServicesRequest() []byte { return genlHeader(ipvsCmdGetService) }

// getServiceRequest is the body of the read of virtual server k alone
// (IPVS_CMD_GET_SERVICE without NLM_F_DUMP): the kernel answers with
// the one virtual server, or ESRCH.
func getServiceRequest(k Key) ([]byte, error) {
	return keyRequest(ipvsCmdGetService, k, "read")
}

// keyRequest is the body of command cmd about virtual server k alone: the
// generic netlink header and k's key attributes. what names the request
// in errors.
func keyRequest(cmd uint8, k Key, what string) ([]byte, error) {
	proto, ok := k.Protocol.Number()
	if !ok || !k.Address.IsValid() {
		return nil, fmt.Errorf("%s of virtual server %s: not one IPVS can hold", what, k)
	}
	attrs, err := keyAttrs(k, uint16(proto))
	if err != nil {
		return nil, fmt.Errorf("encode the %s of virtual server %s: %w", what, k, err)
	}
	return append(genlHeader(cmd), attrs...), nil
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
