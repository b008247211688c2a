package nft

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlattr"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlsock"
)

// The set element reads of the drift repair and of RecordedNodePorts,
// decoded in place. A repair reads every set of the table, tens of
// thousands of elements at 10,000 services; google/nftables'
// GetSetElements copies each message, copies each attribute as it
// decodes it and builds a SetElement with fresh slices per element, and
// that garbage was most of what a quiet proxy allocated. Here the answer
// to an NFT_MSG_GETSETELEM dump is read into a buffer the reader keeps
// (setelems_linux.go), and each element's Key, KeyEnd and Val are slices
// of it, handed to a callback and valid only during the call.

// ErrDumpInterrupted is returned by Conn.EachSetElement when the kernel
// marked the dump interrupted (NLM_F_DUMP_INTR): the set changed while
// it was read, and what the callback saw may miss or repeat elements.
// The caller reads again.
var ErrDumpInterrupted = errors.New("nftables set element dump interrupted: the set changed while it was read")

// nftaSetElemKeyEnd is NFTA_SET_ELEM_KEY_END, the inclusive end of a
// concatenated interval's element, which x/sys/unix does not name.
const nftaSetElemKeyEnd = 10

// parseSetElements reads the body of one NFT_MSG_NEWSETELEM message (the
// nfgenmsg header, then attributes) and calls each for every entry of
// its NFTA_SET_ELEM_LIST_ELEMENTS, in order; the element's slices alias
// body. It reads what google/nftables' GetSetElements reads (set.go:
// elementsFromMsg, SetElement.decode, decodeElement), the same way, so
// that the drift repair sees what it saw before:
//   - every entry of the element list is an element, and an entry that
//     is not an NFTA_LIST_ELEM an empty one (no set of ours holds it);
//   - Key, KeyEnd and Val are the last NFTA_DATA_VALUE or
//     NFTA_DATA_VERDICT inside NFTA_SET_ELEM_KEY, _KEY_END and _DATA,
//     nil without one: a verdict map's Val holds the raw verdict
//     attributes (rawVerdict reads them) and VerdictData stays nil;
//   - IntervalEnd is NFT_SET_ELEM_INTERVAL_END of the last
//     NFTA_SET_ELEM_FLAGS, a big-endian uint32.
//
// It differs where an attribute is malformed, which the kernel never
// sends: that is an error here (also a timeout or expiration that is not
// 8 bytes, which google/nftables fails to decode), where google/nftables
// stops reading that element list and returns what it read. Timeouts,
// expirations, comments and element expressions, which our sets never
// have, are not read. An error returned by each ends the walk and is
// returned as it is.
func parseSetElements(body []byte, each func(nftables.SetElement) error) error {
	if len(body) < nfgenmsgLen {
		return fmt.Errorf("set element message of %d bytes, shorter than its nfgenmsg header", len(body))
	}
	top := nlattr.New(body[nfgenmsgLen:])
	for top.Next() {
		if top.Type != unix.NFTA_SET_ELEM_LIST_ELEMENTS {
			continue
		}
		list := nlattr.New(top.Data)
		for list.Next() {
			var e nftables.SetElement
			if list.Type == unix.NFTA_LIST_ELEM {
				if err := decodeSetElement(list.Data, &e); err != nil {
					return err
				}
			}
			if err := each(e); err != nil {
				return err
			}
		}
		if list.Err != nil {
			return fmt.Errorf("set element list: %w", list.Err)
		}
	}
	if top.Err != nil {
		return fmt.Errorf("set element message: %w", top.Err)
	}
	return nil
}

// decodeSetElement reads one NFTA_LIST_ELEM's attributes into e.
func decodeSetElement(b []byte, e *nftables.SetElement) error {
	w := nlattr.New(b)
	for w.Next() {
		var err error
		switch w.Type {
		case unix.NFTA_SET_ELEM_KEY:
			e.Key, err = dataValue(w.Data)
		case nftaSetElemKeyEnd:
			e.KeyEnd, err = dataValue(w.Data)
		case unix.NFTA_SET_ELEM_DATA:
			e.Val, err = dataValue(w.Data)
		case unix.NFTA_SET_ELEM_FLAGS:
			if len(w.Data) != 4 {
				return fmt.Errorf("set element flags of %d bytes, want 4", len(w.Data))
			}
			e.IntervalEnd = binary.BigEndian.Uint32(w.Data)&unix.NFT_SET_ELEM_INTERVAL_END != 0
		case unix.NFTA_SET_ELEM_TIMEOUT, unix.NFTA_SET_ELEM_EXPIRATION:
			if len(w.Data) != 8 {
				return fmt.Errorf("set element attribute %d of %d bytes, want 8", w.Type, len(w.Data))
			}
		}
		if err != nil {
			return err
		}
	}
	if w.Err != nil {
		return fmt.Errorf("set element: %w", w.Err)
	}
	return nil
}

// dataValue returns the data of the last NFTA_DATA_VALUE or
// NFTA_DATA_VERDICT nested in b, nil without one (decodeElement).
func dataValue(b []byte) ([]byte, error) {
	var v []byte
	w := nlattr.New(b)
	for w.Next() {
		if w.Type == unix.NFTA_DATA_VALUE || w.Type == unix.NFTA_DATA_VERDICT {
			v = w.Data
		}
	}
	if w.Err != nil {
		return nil, fmt.Errorf("set element data: %w", w.Err)
	}
	return v, nil
}

// rawVerdict reads a verdict map element's raw verdict attributes (Val as
// parseSetElements and google/nftables leave it) without allocating, as
// verdictOf(decodeVerdict(b)) reads them: a code that is not 4 bytes, or
// malformed attributes, are unknownVerdict; no code is 0, a drop.
func rawVerdict(b []byte) verdict {
	var code int32
	var chain []byte
	w := nlattr.New(b)
	for w.Next() {
		switch w.Type {
		case unix.NFTA_VERDICT_CODE:
			if len(w.Data) != 4 {
				return unknownVerdict
			}
			code = int32(binary.BigEndian.Uint32(w.Data))
		case unix.NFTA_VERDICT_CHAIN:
			chain = w.Data
		}
	}
	if w.Err != nil {
		return unknownVerdict
	}
	for len(chain) > 0 && chain[len(chain)-1] == 0 { // as mdlayher's String
		chain = chain[:len(chain)-1]
	}
	switch {
	case expr.VerdictKind(code) == expr.VerdictGoto && string(chain) == chainRejectPacket:
		return rejectGoto
	case expr.VerdictKind(code) == expr.VerdictDrop:
		return dropVerdict
	}
	return unknownVerdict
}

// setElemRequest appends to b the NFT_MSG_GETSETELEM dump request of set
// s, with sequence number seq: what google/nftables' GetSetElements
// sends, without NLM_F_ACK (a dump ends in NLMSG_DONE or an error).
func setElemRequest(b []byte, seq uint32, s *nftables.Set) ([]byte, error) {
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.NFTA_SET_ELEM_LIST_TABLE, s.Table.Name)
	ae.String(unix.NFTA_SET_ELEM_LIST_SET, s.Name)
	attrs, err := ae.Encode()
	if err != nil {
		return b, fmt.Errorf("encode the request: %w", err)
	}
	body := append([]byte{byte(s.Table.Family), unix.NFNETLINK_V0, 0, 0}, attrs...)
	return nlsock.AppendMessage(b, unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_GETSETELEM,
		unix.NLM_F_REQUEST|unix.NLM_F_DUMP, seq, body), nil
}

// setElemDump is the answer to one GETSETELEM dump, taken read after
// read. Once an error is known (a kernel error, an interrupted dump, a
// message that does not decode, or each's own) each is not called
// again, but the answer is still read to its end: the kernel refuses a
// new dump on the socket (EBUSY) while one is unread.
type setElemDump struct {
	seq  uint32
	each func(nftables.SetElement) error
	done bool
	// err is the first error; fromEach says it is each's, which the
	// reader returns as it is.
	err      error
	fromEach bool
}

// read takes the messages of one read. Messages of another sequence
// number are left from an earlier request and skipped. An error return
// means the messages themselves are malformed: where the answer ends is
// unknown, and the socket must not be used again.
func (d *setElemDump) read(b []byte) error {
	for len(b) > 0 && !d.done {
		m, rest, err := nlsock.Split(b)
		if err != nil {
			return err
		}
		b = rest
		if m.Seq != d.seq {
			continue
		}
		if m.Flags&unix.NLM_F_DUMP_INTR != 0 {
			d.fail(ErrDumpInterrupted)
		}
		if ends, kernelErr, err := m.Ends(); ends {
			if err != nil {
				return err
			}
			d.done = true
			if kernelErr != nil {
				d.fail(kernelErr)
			}
			continue
		}
		switch m.Type {
		case unix.NLMSG_NOOP:
		case unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWSETELEM:
			if d.err == nil {
				d.fail(parseSetElements(m.Body, d.call))
			}
			d.done = m.Flags&unix.NLM_F_MULTI == 0
		default:
			d.fail(fmt.Errorf("netlink answer: a message of type %#x, not set elements", m.Type))
			d.done = m.Flags&unix.NLM_F_MULTI == 0
		}
	}
	return nil
}

// call hands one element to each, noting an error as each's.
func (d *setElemDump) call(e nftables.SetElement) error {
	err := d.each(e)
	if err != nil && d.err == nil {
		d.err, d.fromEach = err, true
	}
	return err
}

// fail keeps the first error.
func (d *setElemDump) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}
