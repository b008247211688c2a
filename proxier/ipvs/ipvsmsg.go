package ipvs

import (
	"encoding/binary"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlsock"
)

// The IPVS change requests that Kernel.Write sends in batches
// (include/uapi/linux/ip_vs.h). They are encoded here, not by
// github.com/moby/ipvs: moby builds and sends one request per call and
// waits for its answer, and has no way to hand the kernel many. Generic
// netlink processes every message of one sendmsg in turn, so a batch of
// them costs one system call where moby pays a round trip per change.
const (
	ipvsCmdNewService = 1 // IPVS_CMD_NEW_SERVICE
	ipvsCmdSetService = 2 // IPVS_CMD_SET_SERVICE
	ipvsCmdDelService = 3 // IPVS_CMD_DEL_SERVICE
	ipvsCmdNewDest    = 5 // IPVS_CMD_NEW_DEST
	ipvsCmdSetDest    = 6 // IPVS_CMD_SET_DEST
	ipvsCmdDelDest    = 7 // IPVS_CMD_DEL_DEST

	ipvsSvcAttrSchedName = 6 // IPVS_SVC_ATTR_SCHED_NAME, NUL-terminated
	ipvsSvcAttrFlags     = 7 // IPVS_SVC_ATTR_FLAGS: struct ip_vs_flags {flags, mask}
	ipvsSvcAttrTimeout   = 8 // IPVS_SVC_ATTR_TIMEOUT
	ipvsSvcAttrNetmask   = 9 // IPVS_SVC_ATTR_NETMASK

	ipvsDestAttrUThresh = 5 // IPVS_DEST_ATTR_U_THRESH
	ipvsDestAttrLThresh = 6 // IPVS_DEST_ATTR_L_THRESH
)

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

// request is one netlink request of a batch: its message type, its
// flags besides NLM_F_REQUEST (and NLM_F_ACK, which a batch sets on its
// last request only), and its body.
type request struct {
	typ, flags uint16
	body       []byte
}

// splitBatches splits messages of the given sizes, in order, into
// batches of at most maxOps messages and maxBytes bytes (a message larger
// than maxBytes goes alone, for the kernel to refuse), and returns each
// batch's end index.
func splitBatches(sizes []int, maxOps, maxBytes int) []int {
	var ends []int
	n, bytes := 0, 0
	for i, l := range sizes {
		if n > 0 && (n == maxOps || bytes+l > maxBytes) {
			ends = append(ends, i)
			n, bytes = 0, 0
		}
		n, bytes = n+1, bytes+l
	}
	if n > 0 {
		ends = append(ends, len(sizes))
	}
	return ends
}

// readAcks reads the acknowledgements in one read of the socket for a
// batch whose requests have the sequence numbers first, first+1, ...,
// first+len(errs)-1, and only the last of which asks for an
// acknowledgement: the kernel answers the others only when they fail. It
// stores each failure's errno in errs at its request's index and reports
// done on the last request's answer, which comes after every other one
// since the kernel processes a batch's messages in order. Messages of
// other sequence numbers (answers to an earlier request that ended in an
// error) are skipped. Anything malformed is an error, never a panic.
func readAcks(b []byte, first uint32, errs []error) (done bool, err error) {
	n := uint32(len(errs))
	for len(b) > 0 {
		var m nlsock.Message
		if m, b, err = nlsock.Split(b); err != nil {
			return false, err
		}
		i := m.Seq - first // wraps around for an older sequence number
		if i >= n || m.Type != unix.NLMSG_ERROR {
			continue
		}
		_, kernelErr, err := m.Ends()
		if err != nil {
			return false, err
		}
		if kernelErr != nil {
			errs[i] = kernelErr
		}
		if i == n-1 {
			done = true
		}
	}
	return done, nil
}
