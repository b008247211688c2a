package ipvsnl

import (
	"errors"
	"fmt"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlsock"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// nlSocket is a blocking netlink socket (generic netlink for IPVS, route
// netlink for the dummy interface's addresses) that makes one request or
// one batch at a time and reads the answer into a buffer it keeps.
type nlSocket struct {
	fd   int
	seq  uint32
	buf  []byte
	req  []byte            // the last request, its buffer reused
	msgs []netlink.Message // one read's messages, reused
	// kernel is the kernel's netlink address, where requests go: the
	// socket's own, since Sendto writes its encoding into it.
	kernel unix.SockaddrNetlink
}

func openGenlSocket() (*nlSocket, error) { return openNetlinkSocket(unix.NETLINK_GENERIC, "ipvs") }

// openNetlinkSocket opens a socket of netlink protocol proto for what
// (named in its errors).
func openNetlinkSocket(proto int, what string) (*nlSocket, error) {
	fd, err := nlsock.Open(proto, what, genlReadTimeout)
	if err != nil {
		return nil, err
	}
	return &nlSocket{fd: fd, buf: make([]byte, genlReadBuffer)}, nil
}

// execute sends one request (a netlink header of type typ with flags
// besides NLM_F_REQUEST, then body) and hands each read's messages to
// each until the answer is complete. The messages are valid only during
// the call: the next read reuses the buffer.
func (s *nlSocket) execute(typ, flags uint16, body []byte, each func([]netlink.Message) error) error {
	s.seq++
	s.req = nlsock.AppendMessage(s.req[:0], typ, flags|unix.NLM_F_REQUEST, s.seq, body)
	if err := unix.Sendto(s.fd, s.req, 0, &s.kernel); err != nil {
		return fmt.Errorf("netlink send: %w", err)
	}
	return s.receive(each)
}

// receive reads the answer to request s.seq and hands each read's
// messages to each. Whatever fails, it reads the answer to its end, or
// as far as the socket holds one, so that the next request starts clean:
// the kernel refuses a new dump (EBUSY) while an old one is unread.
func (s *nlSocket) receive(each func([]netlink.Message) error) error {
	var failed error
	for {
		n, err := nlsock.Recv(s.fd, s.buf, 0)
		if err != nil {
			return errors.Join(failed, fmt.Errorf("netlink receive: %w", err))
		}
		if n > len(s.buf) && failed == nil {
			failed = fmt.Errorf("netlink receive: a message of %d bytes, more than the %d-byte buffer", n, len(s.buf))
		}
		msgs, done, err := splitAnswer(s.msgs[:0], s.buf[:min(n, len(s.buf))], s.seq)
		s.msgs = msgs
		if err != nil {
			// Where this read's answer ends is unknown: read what the
			// socket holds without waiting. Each read of a dump makes
			// the kernel queue its next piece, so this reads the dump
			// to its end.
			s.discard()
			return errors.Join(failed, err)
		}
		if len(msgs) > 0 && failed == nil {
			failed = each(msgs)
		}
		if done {
			return failed
		}
	}
}

// discard reads and drops whatever the socket holds, without waiting.
func (s *nlSocket) discard() {
	for {
		if _, err := nlsock.Recv(s.fd, s.buf, unix.MSG_DONTWAIT); err != nil {
			return
		}
	}
}

func (s *nlSocket) Close() { unix.Close(s.fd) }
