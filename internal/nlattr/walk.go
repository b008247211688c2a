package nlattr

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// Walk walks the netlink attributes of a message body in place: a zero
// length is an attribute without data; a length of one to three bytes,
// or one past the end, is an error (Err), which ends the walk. Type
// has the nested and byte-order flags cleared; Data is a slice of the
// walked bytes, valid as long as they are.
type Walk struct {
	rest []byte
	Type uint16
	Data []byte
	Err  error
}

// New returns a walk over b, before its first attribute.
func New(b []byte) Walk { return Walk{rest: b} }

// Next moves to the next attribute; false at the end or at an error.
func (w *Walk) Next() bool {
	if w.Err != nil || len(w.rest) == 0 {
		return false
	}
	if len(w.rest) < unix.NLA_HDRLEN {
		w.Err = fmt.Errorf("netlink attribute: %d bytes left, shorter than its header", len(w.rest))
		return false
	}
	l := int(binary.NativeEndian.Uint16(w.rest[0:2]))
	if l > len(w.rest) || (l != 0 && l < unix.NLA_HDRLEN) {
		w.Err = fmt.Errorf("netlink attribute of %d bytes in %d", l, len(w.rest))
		return false
	}
	w.Type = binary.NativeEndian.Uint16(w.rest[2:4]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
	w.Data = w.rest[unix.NLA_HDRLEN:max(l, unix.NLA_HDRLEN)]
	w.rest = w.rest[min(len(w.rest), (max(l, unix.NLA_HDRLEN)+unix.NLA_ALIGNTO-1)&^(unix.NLA_ALIGNTO-1)):]
	return true
}

// Uint16 and Uint32 read the attribute's data as a number in host
// order; data of another length is an error (Err), which ends the walk.
func (w *Walk) Uint16() uint16 {
	if len(w.Data) != 2 {
		w.fail("uint16")
		return 0
	}
	return binary.NativeEndian.Uint16(w.Data)
}

func (w *Walk) Uint32() uint32 {
	if len(w.Data) != 4 {
		w.fail("uint32")
		return 0
	}
	return binary.NativeEndian.Uint32(w.Data)
}

func (w *Walk) fail(what string) {
	if w.Err == nil {
		w.Err = fmt.Errorf("netlink attribute %d is not a %s: %d bytes", w.Type, what, len(w.Data))
	}
	w.rest = nil
}
