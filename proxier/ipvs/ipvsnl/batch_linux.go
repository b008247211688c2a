package ipvsnl

import (
	"fmt"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlsock"
	"golang.org/x/sys/unix"
)

// batchSender sends netlink requests in batches on a socket of its own
// (IPVS changes on generic netlink, the dummy interface's addresses on
// route netlink: both process every message of a sendmsg in turn). A
// batch is as many requests as one sendmsg may carry: the send buffer
// bounds its bytes (the kernel refuses a message over it), and the
// receive buffer its count, since the kernel queues a failing request's
// answer while it processes the batch, before we read any: if every
// request of a batch failed, every answer must fit. Only the last
// request asks for an acknowledgement, so a batch that succeeds costs
// one sendmsg and one read; the kernel answers the others only when they
// fail, and their sequence numbers say which request each answer is
// about. Hand-written rather than mdlayher/netlink's Conn.SendMessages
// and Receive: those allocate a Message per answer and validate sequence
// numbers against one request, where a batch needs its answers matched
// to many.
type batchSender struct {
	s        *nlSocket
	maxBytes int
	maxOps   int
	buf      []byte
}

// newBatchSender sizes s's buffers for batches and takes s over; what
// names its use in errors. It closes s if it fails.
func newBatchSender(s *nlSocket, what string) (*batchSender, error) {
	// An error's answer then does not echo the request: smaller answers,
	// more of them in the receive buffer (Linux 4.3 on; harmless before).
	_ = unix.SetsockoptInt(s.fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	snd := socketBuffer(s.fd, unix.SO_SNDBUFFORCE, unix.SO_SNDBUF, opSendBuffer)
	rcv := socketBuffer(s.fd, unix.SO_RCVBUFFORCE, unix.SO_RCVBUF, opRecvBuffer)
	if snd <= opSendMargin+4096 || rcv < opAnswerBytes {
		s.Close()
		return nil, fmt.Errorf("%s socket: buffers of %d (send) and %d (receive) bytes are too small", what, snd, rcv)
	}
	return &batchSender{s: s, maxBytes: snd - opSendMargin, maxOps: rcv / opAnswerBytes}, nil
}

// socketBuffer asks for a buffer of size bytes, forced past the
// system's cap if allowed, and returns what the kernel granted.
func socketBuffer(fd, force, opt, size int) int {
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, force, size); err != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, size)
	}
	got, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, opt)
	if err != nil {
		return 0
	}
	return got
}

// sendAll sends requests in as few batches as the limits allow, and
// stores the answer to reqs[j] in errs[index[j]].
func (w *batchSender) sendAll(reqs []request, index []int, errs []error) {
	sizes := make([]int, len(reqs))
	for j, r := range reqs {
		sizes[j] = (unix.NLMSG_HDRLEN + len(r.body) + 3) &^ 3
	}
	start := 0
	for _, end := range splitBatches(sizes, w.maxOps, w.maxBytes) {
		w.send(reqs[start:end], index[start:end], errs)
		start = end
	}
}

// send sends one batch in one sendmsg and reads its answers into errs
// (errs[index[j]] for reqs[j]).
func (w *batchSender) send(reqs []request, index []int, errs []error) {
	first := w.s.seq + 1
	w.s.seq += uint32(len(reqs))
	w.buf = w.buf[:0]
	for j, r := range reqs {
		flags := r.flags | unix.NLM_F_REQUEST
		if j == len(reqs)-1 {
			flags |= unix.NLM_F_ACK
		}
		w.buf = nlsock.AppendMessage(w.buf, r.typ, flags, first+uint32(j), r.body)
	}
	got := make([]error, len(reqs))
	if err := unix.Sendto(w.s.fd, w.buf, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		// The kernel takes a message whole or not at all: none was made.
		for j := range got {
			got[j] = fmt.Errorf("netlink send of %d requests: %w", len(reqs), err)
		}
	} else if err := w.receive(first, got); err != nil {
		// The kernel answered only failures: any other op may or may not
		// have been made.
		for j := range got {
			if got[j] == nil {
				got[j] = fmt.Errorf("%w: %w", ErrUnanswered, err)
			}
		}
	}
	for j, err := range got {
		errs[index[j]] = err
	}
	if cap(w.buf) > keepBatchBuffer {
		w.buf = nil
	}
}

// receive reads the answers of the batch whose first sequence number is
// first until the last request's acknowledgement.
func (w *batchSender) receive(first uint32, got []error) error {
	for {
		n, err := nlsock.Recv(w.s.fd, w.s.buf, 0)
		if err != nil {
			w.s.discard()
			return fmt.Errorf("netlink receive: %w", err)
		}
		if n > len(w.s.buf) {
			w.s.discard()
			return fmt.Errorf("netlink receive: a message of %d bytes, more than the %d-byte buffer", n, len(w.s.buf))
		}
		done, err := readAcks(w.s.buf[:n], first, got)
		if err != nil {
			w.s.discard()
			return err
		}
		if done {
			return nil
		}
	}
}

func (w *batchSender) Close() { w.s.Close() }
