package nlsock

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// msg is one netlink message as the kernel writes it, padded to the
// alignment unless unpadded.
func msg(typ, flags uint16, seq uint32, body []byte) []byte {
	b := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+len(body)+3)
	binary.NativeEndian.PutUint32(b[0:4], uint32(unix.NLMSG_HDRLEN+len(body)))
	binary.NativeEndian.PutUint16(b[4:6], typ)
	binary.NativeEndian.PutUint16(b[6:8], flags)
	binary.NativeEndian.PutUint32(b[8:12], seq)
	b = append(b, body...)
	for len(b)%unix.NLMSG_ALIGNTO != 0 {
		b = append(b, 0)
	}
	return b
}

func code(c int32) []byte { return binary.NativeEndian.AppendUint32(nil, uint32(c)) }

// TestSplitTakesMessagesWhereTheirHeadersSay: each message is cut at the
// length its header gives, the next one starts at the next alignment
// (the last one's padding may be missing), and a header that promises
// more than is left is an error, not a read past the buffer.
func TestSplitTakesMessagesWhereTheirHeadersSay(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		want string // each message "type/flags/seq:body", or the error
	}{
		{"one message", msg(16, 2, 7, []byte("abcd")), "16/2/7:abcd"},
		{"a body padded to the alignment", slices.Concat(msg(16, 0, 1, []byte("ab")), msg(17, 0, 2, []byte("xyz"))), "16/0/1:ab 17/0/2:xyz"},
		{"the last message's padding missing", msg(16, 0, 1, []byte("ab"))[:unix.NLMSG_HDRLEN+2], "16/0/1:ab"},
		{"a header cut short", msg(16, 0, 1, nil)[:10], "netlink answer: 10 bytes left, shorter than a message header"},
		{"a length beyond the buffer", msg(16, 0, 1, []byte("abcd"))[:unix.NLMSG_HDRLEN+2], "netlink answer: a message of 20 bytes in 18"},
		{"a length shorter than a header", func() []byte {
			b := msg(16, 0, 1, nil)
			binary.NativeEndian.PutUint32(b, 8)
			return b
		}(), "netlink answer: a message of 8 bytes in 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for b := tc.b; len(b) > 0; {
				m, rest, err := Split(b)
				if err != nil {
					got = append(got, err.Error())
					break
				}
				got = append(got, fmt.Sprintf("%d/%d/%d:%s", m.Type, m.Flags, m.Seq, m.Body))
				b = rest
			}
			if s := strings.Join(got, " "); s != tc.want {
				t.Errorf("got %q, want %q", s, tc.want)
			}
		})
	}
}

// TestEndsReadsTheKernelsAnswerToARequest: an NLMSG_ERROR or NLMSG_DONE
// ends an answer, with the kernel's errno when its code is negative; an
// NLMSG_ERROR too short for its code is malformed; any other message
// does not end the answer.
func TestEndsReadsTheKernelsAnswerToARequest(t *testing.T) {
	for _, tc := range []struct {
		name      string
		m         Message
		ends      bool
		kernelErr error
		malformed bool
	}{
		{"an acknowledgement", Message{Type: unix.NLMSG_ERROR, Body: code(0)}, true, nil, false},
		{"a failure", Message{Type: unix.NLMSG_ERROR, Body: code(-int32(unix.ENOENT))}, true, syscall.ENOENT, false},
		{"a dump's end", Message{Type: unix.NLMSG_DONE, Body: code(0)}, true, nil, false},
		{"a dump's end with an error", Message{Type: unix.NLMSG_DONE, Body: code(-int32(unix.EINTR))}, true, syscall.EINTR, false},
		{"a dump's end without its code", Message{Type: unix.NLMSG_DONE}, true, nil, false},
		{"an error without its code", Message{Type: unix.NLMSG_ERROR, Body: []byte{1}}, true, nil, true},
		{"a data message", Message{Type: 0x10, Body: code(-1)}, false, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ends, kernelErr, err := tc.m.Ends()
			if ends != tc.ends || !errors.Is(kernelErr, tc.kernelErr) || (kernelErr == nil) != (tc.kernelErr == nil) ||
				(err != nil) != tc.malformed {
				t.Errorf("Ends() = %v, %v, %v; want %v, %v, malformed %v", ends, kernelErr, err, tc.ends, tc.kernelErr, tc.malformed)
			}
		})
	}
}

// TestAppendMessageIsSplitsInverse: a message appended, after whatever
// the buffer held, splits back to its header and body, padded from its
// own start.
func TestAppendMessageIsSplitsInverse(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prefix []byte
		body   string
	}{
		{"an empty buffer, an aligned body", nil, "abcd"},
		{"an empty buffer, a body to pad", nil, "abcde"},
		{"after an unaligned byte", []byte{0xff}, "abcde"},
		{"an empty body", []byte{1, 2, 3, 4}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := AppendMessage(tc.prefix, 16, unix.NLM_F_REQUEST, 9, []byte(tc.body))
			msgLen := len(b) - len(tc.prefix)
			if msgLen%unix.NLMSG_ALIGNTO != 0 || msgLen >= unix.NLMSG_HDRLEN+len(tc.body)+unix.NLMSG_ALIGNTO {
				t.Errorf("the message takes %d bytes for a %d-byte body", msgLen, len(tc.body))
			}
			m, rest, err := Split(b[len(tc.prefix):])
			if err != nil || m.Type != 16 || m.Flags != unix.NLM_F_REQUEST || m.Seq != 9 || string(m.Body) != tc.body || len(rest) != 0 {
				t.Errorf("Split: %+v, %d bytes left, %v", m, len(rest), err)
			}
		})
	}
}

// FuzzSplit: whatever a read returned, Split never panics, and each
// message it takes lies within what it was given and leaves less.
func FuzzSplit(f *testing.F) {
	f.Add(msg(16, 2, 7, []byte("abcd")))
	f.Add(append(msg(2, 0, 1, code(-2)), msg(3, 0, 1, code(0))...))
	f.Add([]byte{255, 255, 255, 255, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		for len(b) > 0 {
			m, rest, err := Split(b)
			if err != nil {
				return
			}
			if len(rest) >= len(b) || unix.NLMSG_HDRLEN+len(m.Body) > len(b) {
				t.Fatalf("Split of %d bytes took a %d-byte body and left %d", len(b), len(m.Body), len(rest))
			}
			_, _, _ = m.Ends()
			b = rest
		}
	})
}
