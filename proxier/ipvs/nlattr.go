package ipvs

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// attrWalk walks the netlink attributes of a message body in place. It
// reads what mdlayher/netlink's AttributeDecoder reads, the same way
// (a zero length is an attribute without data; a length of one to three
// bytes, or one past the end, is an error), but it hands out the data as
// a slice of the message: the decoder copies every attribute's data
// into a new slice. The periodic check and the repair list the
// destinations of thousands of virtual servers, a dozen attributes per
// destination: at 10,000 services, decoding them was a third of what
// the proxy allocated after its cold start (BENCHMARKS.md). The fuzz
// test holds the two to the same answers.
type attrWalk struct {
	rest []byte
	typ  uint16
	data []byte
	err  error
}

func walkAttrs(b []byte) attrWalk { return attrWalk{rest: b} }

// next moves to the next attribute; false at the end or at an error.
func (w *attrWalk) next() bool {
	if w.err != nil || len(w.rest) == 0 {
		return false
	}
	if len(w.rest) < unix.NLA_HDRLEN {
		w.err = fmt.Errorf("netlink attribute: %d bytes left, shorter than its header", len(w.rest))
		return false
	}
	l := int(binary.NativeEndian.Uint16(w.rest[0:2]))
	if l > len(w.rest) || (l != 0 && l < unix.NLA_HDRLEN) {
		w.err = fmt.Errorf("netlink attribute of %d bytes in %d", l, len(w.rest))
		return false
	}
	w.typ = binary.NativeEndian.Uint16(w.rest[2:4]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
	w.data = w.rest[unix.NLA_HDRLEN:max(l, unix.NLA_HDRLEN)]
	w.rest = w.rest[min(len(w.rest), (max(l, unix.NLA_HDRLEN)+unix.NLA_ALIGNTO-1)&^(unix.NLA_ALIGNTO-1)):]
	return true
}

// uint16 and uint32 read the attribute's data as a number in host
// order; data of another length is an error.
func (w *attrWalk) uint16() uint16 {
	if len(w.data) != 2 {
		w.fail("uint16")
		return 0
	}
	return binary.NativeEndian.Uint16(w.data)
}

func (w *attrWalk) uint32() uint32 {
	if len(w.data) != 4 {
		w.fail("uint32")
		return 0
	}
	return binary.NativeEndian.Uint32(w.data)
}

func (w *attrWalk) fail(what string) {
	if w.err == nil {
		w.err = fmt.Errorf("netlink attribute %d is not a %s: %d bytes", w.typ, what, len(w.data))
	}
	w.rest = nil
}
