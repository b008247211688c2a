package ipvsnl

import (
	"errors"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlsock"
)

// ErrDumpInterrupted: the kernel marked a message of a dump as
// interrupted (NLM_F_DUMP_INTR, on the message where it saw the state
// change, and on newer kernels the DONE too); what it listed may miss or
// repeat entries.
var ErrDumpInterrupted = errors.New("netlink dump interrupted")

// splitAnswer splits what one read of a netlink socket returned into
// the messages answering request seq. It reports done when the answer
// is complete: a dump's NLMSG_DONE, an acknowledgement, or a message
// that is not part of a multi-part answer. An NLMSG_ERROR, or a DONE
// that carries one, is returned as the errno it holds, and any message
// marked interrupted as ErrDumpInterrupted. Messages of another sequence number
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
			return nil, false, ErrDumpInterrupted
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
