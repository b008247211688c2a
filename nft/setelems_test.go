package nft

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// newSetElemType is the netlink type of a NEWSETELEM message.
const newSetElemType = unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWSETELEM

// nftablesReads returns what google/nftables' GetSetElements reads from
// a NEWSETELEM message of body: its decoder (elementsFromMsg) is
// unexported, so the message is its test dialer's answer to the dump.
// A panic (it slices the body's first 4 bytes off unchecked, and reads
// an element's comment past its end) is an error.
func nftablesReads(body []byte) (elems []nftables.SetElement, err error) {
	c, err := nftables.New(nftables.WithTestDial(func(req []netlink.Message) ([]netlink.Message, error) {
		m := netlink.Message{Header: netlink.Header{Type: newSetElemType}, Data: body}
		if len(req) > 0 {
			m.Header.Sequence = req[0].Header.Sequence
		}
		return []netlink.Message{m}, nil
	}))
	if err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			elems, err = nil, fmt.Errorf("google/nftables panicked: %v", r)
		}
	}()
	return c.GetSetElements(&nftables.Set{Table: &nftables.Table{Family: nftables.TableFamilyINet, Name: TableName}, Name: "s"})
}

// nftablesEncodes returns the bodies of the NEWSETELEM messages
// google/nftables sends to add every element of m, set by set, with the
// cluster CIDRs: what the kernel answers a dump with, in the same
// attributes, once each list entry is an NFTA_LIST_ELEM (asDumped).
func nftablesEncodes(t testing.TB, m *mirror) [][]byte {
	t.Helper()
	var bodies [][]byte
	c, err := nftables.New(nftables.WithTestDial(func(req []netlink.Message) ([]netlink.Message, error) {
		for _, r := range req {
			if r.Header.Type == newSetElemType {
				bodies = append(bodies, asDumped(t, r.Data))
			}
		}
		return nil, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	w := New(testConfig, &linuxConn{Conn: c}) // only its queue is used
	sets := newSets(w.table)
	if err := w.queueDiff(diff{add: m.elements()}, sets); err != nil {
		t.Fatal(err)
	}
	for _, fam := range families { // interval starts and ends
		id := idOf(setClusterCIDRs, fam)
		if err := c.SetAddElements(sets[id], cidrElements(testConfig.ClusterCIDRs, fam)); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.Flush() // the test dialer sends no acknowledgements
	if len(bodies) == 0 {
		t.Fatal("google/nftables sent no set element message")
	}
	return bodies
}

// asDumped returns a NEWSETELEM body with every element list entry
// typed NFTA_LIST_ELEM, as the kernel types them: google/nftables numbers
// them 1, 2, 3..., which the kernel does not read.
func asDumped(t testing.TB, body []byte) []byte {
	t.Helper()
	ae := netlink.NewAttributeEncoder()
	eachAttr(body[nfgenmsgLen:], func(typ uint16, data []byte) {
		if typ != unix.NFTA_SET_ELEM_LIST_ELEMENTS {
			ae.Bytes(typ, data)
			return
		}
		ae.Nested(typ, func(l *netlink.AttributeEncoder) error {
			eachAttr(data, func(_ uint16, elem []byte) { l.Bytes(unix.NFTA_LIST_ELEM|unix.NLA_F_NESTED, elem) })
			return nil
		})
	})
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return append(slices.Clone(body[:nfgenmsgLen]), b...)
}

// unreadAttributes reports whether an element of body carries a comment
// (NFTA_SET_ELEM_USERDATA) or expressions (NFTA_SET_ELEM_EXPR), which
// google/nftables decodes, and can fail or panic on, and we do not read:
// no set of ours has them.
func unreadAttributes(body []byte) bool {
	if len(body) < nfgenmsgLen {
		return false
	}
	found := false
	eachAttr(body[nfgenmsgLen:], func(typ uint16, list []byte) {
		if typ == unix.NFTA_SET_ELEM_LIST_ELEMENTS {
			eachAttr(list, func(_ uint16, elem []byte) {
				eachAttr(elem, func(typ uint16, _ []byte) {
					found = found || typ == unix.NFTA_SET_ELEM_USERDATA || typ == unix.NFTA_SET_ELEM_EXPR
				})
			})
		}
	})
	return found
}

// eachAttr calls f for the attributes mdlayher's decoder reads from b,
// none when it fails.
func eachAttr(b []byte, f func(typ uint16, data []byte)) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return
	}
	for ad.Next() {
		f(ad.Type(), ad.Bytes())
	}
}

// mdlayherStrict reads body as parseSetElements does, with mdlayher's
// decoder at every level and every error checked: which bodies are
// malformed. google/nftables checks some errors only.
func mdlayherStrict(body []byte) error {
	if len(body) < nfgenmsgLen {
		return errors.New("shorter than nfgenmsg")
	}
	return walkStrict(body[nfgenmsgLen:], func(typ uint16, list []byte) error {
		if typ != unix.NFTA_SET_ELEM_LIST_ELEMENTS {
			return nil
		}
		return walkStrict(list, func(typ uint16, elem []byte) error {
			if typ != unix.NFTA_LIST_ELEM {
				return nil
			}
			return walkStrict(elem, func(typ uint16, v []byte) error {
				switch {
				case typ == unix.NFTA_SET_ELEM_KEY || typ == nftaSetElemKeyEnd || typ == unix.NFTA_SET_ELEM_DATA:
					return walkStrict(v, func(uint16, []byte) error { return nil })
				case typ == unix.NFTA_SET_ELEM_FLAGS && len(v) != 4:
					return errors.New("flags")
				case (typ == unix.NFTA_SET_ELEM_TIMEOUT || typ == unix.NFTA_SET_ELEM_EXPIRATION) && len(v) != 8:
					return errors.New("timeout")
				}
				return nil
			})
		})
	})
}

func walkStrict(b []byte, f func(typ uint16, data []byte) error) error {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return err
	}
	for ad.Next() {
		if err := f(ad.Type(), ad.Bytes()); err != nil {
			return err
		}
	}
	return ad.Err()
}

// FuzzParseSetElementsReadsWhatNftablesReads: on any NEWSETELEM message
// body, parseSetElements yields the elements (Key, KeyEnd, Val, the
// verdict in it, IntervalEnd) google/nftables' GetSetElements yields,
// or fails where it fails. google/nftables checks few errors: past a
// malformed attribute, at any level but the top's and the element
// lists' headers, it stops reading that level and returns what it read.
// parseSetElements fails on exactly the bodies mdlayher's decoder,
// every error checked, finds malformed (mdlayherStrict), having read a
// prefix of what google/nftables returns. Bodies with element comments
// or expressions, which we do not read, are skipped.
func FuzzParseSetElementsReadsWhatNftablesReads(f *testing.F) {
	for _, b := range nftablesEncodes(f, mirrorOf(fullPlan())) {
		f.Add(b)
	}
	f.Add([]byte{1, 0, 0})                                                // shorter than nfgenmsg
	f.Add([]byte{1, 0, 0, 0, 12, 0, 3, 0x80, 8, 0, 2, 0, 4, 0, 0, 0})     // an entry that is not a list element
	f.Add([]byte{1, 0, 0, 0, 12, 0, 3, 0x80, 8, 0, 1, 0x80, 7, 0, 3, 0})  // flags of 3 bytes
	f.Add([]byte{1, 0, 0, 0, 16, 0, 3, 0x80, 12, 0, 1, 0x80, 7, 0, 3, 0}) // a list longer than the message
	f.Fuzz(func(t *testing.T, body []byte) {
		if unreadAttributes(body) {
			t.Skip("an element with a comment or expressions")
		}
		var mine []nftables.SetElement
		err := parseSetElements(body, func(e nftables.SetElement) error {
			mine = append(mine, e)
			return nil
		})
		if strict := mdlayherStrict(body); (err != nil) != (strict != nil) {
			t.Fatalf("parseSetElements: %v; mdlayher, every error checked: %v", err, strict)
		}
		theirs, theirErr := nftablesReads(body)
		switch {
		case theirErr != nil:
			if err == nil {
				t.Fatalf("google/nftables: %v; parseSetElements read %d elements without an error", theirErr, len(mine))
			}
			return
		case err == nil && len(theirs) != len(mine):
			t.Fatalf("parseSetElements read %d elements, google/nftables %d", len(mine), len(theirs))
		case err != nil && len(theirs) < len(mine):
			t.Fatalf("parseSetElements read %d elements before it failed (%v), google/nftables %d", len(mine), err, len(theirs))
		}
		for i := range mine {
			if d := elementDiff(mine[i], theirs[i]); d != "" {
				t.Errorf("element %d: %s", i, d)
			}
		}
	})
}

// elementDiff compares what parseSetElements and google/nftables read
// of one element.
func elementDiff(mine, theirs nftables.SetElement) string {
	switch {
	case !bytes.Equal(mine.Key, theirs.Key) || !bytes.Equal(mine.KeyEnd, theirs.KeyEnd) || !bytes.Equal(mine.Val, theirs.Val):
		return fmt.Sprintf("read %x-%x:%x, google/nftables %x-%x:%x", mine.Key, mine.KeyEnd, mine.Val, theirs.Key, theirs.KeyEnd, theirs.Val)
	case mine.IntervalEnd != theirs.IntervalEnd:
		return fmt.Sprintf("interval end %v, google/nftables %v", mine.IntervalEnd, theirs.IntervalEnd)
	case mine.VerdictData != nil || theirs.VerdictData != nil:
		return fmt.Sprintf("a decoded verdict: %v, google/nftables %v", mine.VerdictData, theirs.VerdictData)
	case rawVerdict(mine.Val) != verdictOf(decodeVerdict(theirs.Val)):
		return fmt.Sprintf("verdict %d, google/nftables's read by decodeVerdict %d", rawVerdict(mine.Val), verdictOf(decodeVerdict(theirs.Val)))
	}
	return ""
}

// TestRawVerdictReadsWhatDecodeVerdictReads: the verdicts we write, and
// the others, read alike without allocating.
func TestRawVerdictReadsWhatDecodeVerdictReads(t *testing.T) {
	verdictAttrs := func(code uint32, chain string, codeLen int) []byte {
		ae := netlink.NewAttributeEncoder()
		ae.Bytes(unix.NFTA_VERDICT_CODE, binary.BigEndian.AppendUint32(nil, code)[:codeLen])
		if chain != "" {
			ae.String(unix.NFTA_VERDICT_CHAIN, chain)
		}
		b, err := ae.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	code := func(k expr.VerdictKind) uint32 { return uint32(int32(k)) }
	goTo, jump, drop, accept := code(expr.VerdictGoto), code(expr.VerdictJump), code(expr.VerdictDrop), code(expr.VerdictAccept)
	for _, tc := range []struct {
		name string
		b    []byte
		want verdict
	}{
		{"goto reject-packet", verdictAttrs(goTo, chainRejectPacket, 4), rejectGoto},
		{"goto reject-packet, padded with NULs", verdictAttrs(goTo, chainRejectPacket+"\x00\x00", 4), rejectGoto},
		{"goto another chain", verdictAttrs(goTo, "other", 4), unknownVerdict},
		{"jump reject-packet", verdictAttrs(jump, chainRejectPacket, 4), unknownVerdict},
		{"drop", verdictAttrs(drop, "", 4), dropVerdict},
		{"accept", verdictAttrs(accept, "", 4), unknownVerdict},
		{"a code of 3 bytes", verdictAttrs(drop, "", 3), unknownVerdict},
		{"no attributes: code 0, a drop", nil, dropVerdict},
		{"malformed", []byte{8, 0, 1}, unknownVerdict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ref := rawVerdict(tc.b), verdictOf(decodeVerdict(tc.b))
			if got != tc.want || ref != tc.want {
				t.Errorf("rawVerdict %d, decodeVerdict %d; want %d", got, ref, tc.want)
			}
			if tc.name == "malformed" {
				return // nlattr's error allocates; the kernel sends none
			}
			if n := testing.AllocsPerRun(10, func() { rawVerdict(tc.b) }); n != 0 {
				t.Errorf("rawVerdict allocates %v times", n)
			}
		})
	}
}

// TestSetElemRequestIsWhatNftablesSends: our dump request is
// google/nftables' GetSetElements', but for NLM_F_ACK, which a dump
// does not need.
func TestSetElemRequestIsWhatNftablesSends(t *testing.T) {
	var sent netlink.Message
	c, err := nftables.New(nftables.WithTestDial(func(req []netlink.Message) ([]netlink.Message, error) {
		if len(req) > 0 {
			sent = req[0]
		}
		return nil, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	s := &nftables.Set{Table: &nftables.Table{Family: nftables.TableFamilyINet, Name: TableName}, Name: "service-ports-v4"}
	_, _ = c.GetSetElements(s)
	want, err := sent.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	got, err := setElemRequest([]byte{0xff}, sent.Header.Sequence, s)
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != 0xff {
		t.Fatal("setElemRequest did not append")
	}
	got = got[1:]
	binary.NativeEndian.PutUint16(want[6:8], binary.NativeEndian.Uint16(want[6:8])&^unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(want[12:16], 0) // the port id mdlayher's test socket fills in
	if !bytes.Equal(got, want) {
		t.Errorf("request\n%x, google/nftables sends\n%x", got, want)
	}
}

// answer builds netlink messages: type, flags and sequence number, then
// the body.
func answer(msgs ...[]byte) []byte {
	var b []byte
	for _, m := range msgs {
		b = append(b, m...)
		for len(b)%unix.NLMSG_ALIGNTO != 0 {
			b = append(b, 0)
		}
	}
	return b
}

func message(typ, flags uint16, seq uint32, body []byte) []byte {
	b := binary.NativeEndian.AppendUint32(nil, uint32(unix.NLMSG_HDRLEN+len(body)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = binary.NativeEndian.AppendUint16(b, flags)
	b = binary.NativeEndian.AppendUint32(b, seq)
	b = binary.NativeEndian.AppendUint32(b, 0)
	return append(b, body...)
}

func errnoBody(code int32) []byte { return binary.NativeEndian.AppendUint32(nil, uint32(code)) }

// TestSetElemDumpEndsAndFailsAsTheKernelSays: the answer to a dump ends
// at NLMSG_DONE or an error; an error, a DONE that carries one, an
// interrupted dump or an element list that does not decode is the
// read's error, each is not called after it, and the answer is still
// read to its end; messages of an earlier request are skipped.
func TestSetElemDumpEndsAndFailsAsTheKernelSays(t *testing.T) {
	elems := nftablesEncodes(t, mirrorOf(manyServices(3)))[0] // one set's elements
	n, err := 0, parseSetElements(elems, func(nftables.SetElement) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	_ = parseSetElements(elems, func(nftables.SetElement) error { n++; return nil })
	const seq = 7
	multi := uint16(unix.NLM_F_MULTI)
	eachFails := errors.New("each fails")
	for _, tc := range []struct {
		name      string
		reads     [][]byte
		eachErr   error
		wantCalls int
		wantDone  bool
		wantErr   error // errors.Is; nil: no error
		malformed bool  // read returns an error: the socket is unusable
	}{
		{"elements, then DONE", [][]byte{answer(message(newSetElemType, multi, seq, elems)), answer(message(unix.NLMSG_DONE, multi, seq, errnoBody(0)))}, nil, n, true, nil, false},
		{"elements and DONE in one read", [][]byte{answer(message(newSetElemType, multi, seq, elems), message(unix.NLMSG_DONE, multi, seq, errnoBody(0)))}, nil, n, true, nil, false},
		{"a missing set: ENOENT", [][]byte{answer(message(unix.NLMSG_ERROR, 0, seq, errnoBody(-int32(unix.ENOENT))))}, nil, 0, true, syscall.ENOENT, false},
		{"a DONE carrying an error", [][]byte{answer(message(newSetElemType, multi, seq, elems), message(unix.NLMSG_DONE, multi, seq, errnoBody(-int32(unix.EINTR))))}, nil, n, true, syscall.EINTR, false},
		{"interrupted: each not called, read to DONE", [][]byte{answer(message(newSetElemType, multi|unix.NLM_F_DUMP_INTR, seq, elems)), answer(message(newSetElemType, multi, seq, elems)), answer(message(unix.NLMSG_DONE, multi, seq, errnoBody(0)))}, nil, 0, true, ErrDumpInterrupted, false},
		{"interrupted on DONE", [][]byte{answer(message(newSetElemType, multi, seq, elems), message(unix.NLMSG_DONE, multi|unix.NLM_F_DUMP_INTR, seq, errnoBody(0)))}, nil, n, true, ErrDumpInterrupted, false},
		{"an earlier request's messages are skipped", [][]byte{answer(message(newSetElemType, multi, seq-1, elems), message(unix.NLMSG_DONE, multi, seq-1, errnoBody(0))), answer(message(unix.NLMSG_DONE, multi, seq, errnoBody(0)))}, nil, 0, true, nil, false},
		{"each's error stops the calls, not the read", [][]byte{answer(message(newSetElemType, multi, seq, elems)), answer(message(newSetElemType, multi, seq, elems)), answer(message(unix.NLMSG_DONE, multi, seq, errnoBody(0)))}, eachFails, 1, true, eachFails, false},
		{"an element list that does not decode", [][]byte{answer(message(newSetElemType, multi, seq, []byte{1, 0, 0, 0, 8, 0, 3, 0x80, 9})), answer(message(newSetElemType, multi, seq, elems)), answer(message(unix.NLMSG_DONE, multi, seq, errnoBody(0)))}, nil, 0, true, nil, false},
		{"a message longer than the read", [][]byte{message(newSetElemType, multi, seq, elems)[:30]}, nil, 0, false, nil, true},
		{"an error message without its code", [][]byte{answer(message(unix.NLMSG_ERROR, 0, seq, nil))}, nil, 0, true, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			d := setElemDump{seq: seq, each: func(nftables.SetElement) error { calls++; return tc.eachErr }}
			var readErr error
			for _, r := range tc.reads {
				if readErr = d.read(r); readErr != nil || d.done {
					break
				}
			}
			if (readErr != nil) != tc.malformed {
				t.Fatalf("read error %v, want one: %v", readErr, tc.malformed)
			}
			if tc.malformed {
				return
			}
			if d.done != tc.wantDone || calls != tc.wantCalls {
				t.Errorf("done %v after %d calls of each, want %v after %d", d.done, calls, tc.wantDone, tc.wantCalls)
			}
			switch {
			case tc.wantErr != nil && !errors.Is(d.err, tc.wantErr):
				t.Errorf("error %v, want %v", d.err, tc.wantErr)
			case tc.wantErr == nil && tc.name == "an element list that does not decode":
				if d.err == nil || d.fromEach {
					t.Errorf("error %v (each's: %v), want the list's", d.err, d.fromEach)
				}
			case tc.wantErr == nil && d.err != nil:
				t.Errorf("error %v, want none", d.err)
			}
			if d.fromEach != (tc.eachErr != nil) {
				t.Errorf("error is each's: %v, want %v", d.fromEach, tc.eachErr != nil)
			}
		})
	}
}

// TestElementsReadBackAsWritten: every element of every set and map
// (verdicts and data included), encoded as google/nftables sends it,
// reads back through parseSetElements and kernelElement as the mirror
// holds it.
func TestElementsReadBackAsWritten(t *testing.T) {
	m := mirrorOf(fullPlan())
	byName := map[string]setID{}
	for i := range numSets() {
		byName[setID(i).name()] = setID(i)
	}
	var got []element
	for _, b := range nftablesEncodes(t, m) {
		var name string
		eachAttr(b[nfgenmsgLen:], func(typ uint16, data []byte) {
			if typ == unix.NFTA_SET_ELEM_LIST_SET {
				name = string(bytes.TrimRight(data, "\x00"))
			}
		})
		id, ok := byName[name]
		if !ok {
			t.Fatalf("a message for set %q", name)
		}
		err := parseSetElements(b, func(e nftables.SetElement) error {
			if id.def().base == setClusterCIDRs {
				return nil
			}
			eid, v, err := kernelElement(id, e)
			got = append(got, element{id: eid, v: v})
			return err
		})
		if err != nil {
			t.Fatalf("set %s: %v", name, err)
		}
	}
	slices.SortFunc(got, func(a, b element) int { return compareIDs(a.id, b.id) })
	if want := m.elements(); !slices.Equal(got, want) {
		t.Errorf("read back %d elements, wrote %d:\nread  %v\nwrote %v", len(got), len(want), got, want)
	}
}
