package nlsock

import (
	"encoding/binary"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// Message is one netlink message of what a read returned: its header's
// fields and its body, a slice of the read's buffer (not a copy).
type Message struct {
	Type, Flags uint16
	Seq         uint32
	Body        []byte
}

// Split takes the first message off b, what one read of a netlink socket
// returned, and returns it with the rest of b (from the next aligned
// message). b too short for the header, or for the length the header
// gives, is an error: where the answer goes on is then unknown, and the
// socket must not be read again.
func Split(b []byte) (m Message, rest []byte, err error) {
	if len(b) < unix.NLMSG_HDRLEN {
		return Message{}, nil, fmt.Errorf("netlink answer: %d bytes left, shorter than a message header", len(b))
	}
	l := int(binary.NativeEndian.Uint32(b[0:4]))
	if l < unix.NLMSG_HDRLEN || l > len(b) {
		return Message{}, nil, fmt.Errorf("netlink answer: a message of %d bytes in %d", l, len(b))
	}
	m = Message{
		Type:  binary.NativeEndian.Uint16(b[4:6]),
		Flags: binary.NativeEndian.Uint16(b[6:8]),
		Seq:   binary.NativeEndian.Uint32(b[8:12]),
		Body:  b[unix.NLMSG_HDRLEN:l],
	}
	return m, b[min(len(b), (l+unix.NLMSG_ALIGNTO-1)&^(unix.NLMSG_ALIGNTO-1)):], nil
}

// Ends reports whether m ends its request's answer: an NLMSG_ERROR
// (an acknowledgement, or the request's failure) or an NLMSG_DONE. For
// those, kernelErr is the errno the kernel answered (nil for success),
// and err says the message itself is malformed: an NLMSG_ERROR too
// short to hold its code.
func (m Message) Ends() (ends bool, kernelErr, err error) {
	if m.Type != unix.NLMSG_ERROR && m.Type != unix.NLMSG_DONE {
		return false, nil, nil
	}
	if len(m.Body) < 4 {
		if m.Type == unix.NLMSG_ERROR {
			return true, nil, fmt.Errorf("netlink answer: an error message of %d bytes", len(m.Body))
		}
		return true, nil, nil // a DONE without its code, as old kernels send
	}
	if code := int32(binary.NativeEndian.Uint32(m.Body[:4])); code < 0 {
		return true, syscall.Errno(-code), nil
	}
	return true, nil, nil
}

// AppendMessage appends to b one netlink message: a header of type typ,
// flags and sequence number seq (port id 0: the kernel's), body, and
// padding to the alignment. It is Split's inverse.
func AppendMessage(b []byte, typ, flags uint16, seq uint32, body []byte) []byte {
	start := len(b)
	b = binary.NativeEndian.AppendUint32(b, uint32(unix.NLMSG_HDRLEN+len(body)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = binary.NativeEndian.AppendUint16(b, flags)
	b = binary.NativeEndian.AppendUint32(b, seq)
	b = binary.NativeEndian.AppendUint32(b, 0)
	b = append(b, body...)
	for (len(b)-start)%unix.NLMSG_ALIGNTO != 0 {
		b = append(b, 0)
	}
	return b
}
