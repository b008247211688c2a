package packettrace

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// ErrUnsupported is wrapped by the error of a trace that met an
// expression (or an expression's option) the tracer does not model.
var ErrUnsupported = errors.New("unsupported expression")

// regs is the data part of nf_tables' registers: 16 words of 4 bytes,
// NFT_REG_1..4 naming 16 bytes each and NFT_REG32_00..15 4 bytes each.
type regs [64]byte

// slot returns the byte offset of register r, checking that n bytes fit.
func slot(r uint32, n int) (int, error) {
	var off int
	switch {
	case r >= unix.NFT_REG_1 && r <= unix.NFT_REG_4:
		off = int(r-unix.NFT_REG_1) * 16
	case r >= unix.NFT_REG32_00 && r <= unix.NFT_REG32_15:
		off = int(r-unix.NFT_REG32_00) * 4
	default:
		return 0, fmt.Errorf("register %d: %w", r, ErrUnsupported)
	}
	if n < 0 || off+n > len(regs{}) {
		return 0, fmt.Errorf("register %d: %d bytes overflow the registers", r, n)
	}
	return off, nil
}

func (g *regs) load(r uint32, n int) ([]byte, error) {
	off, err := slot(r, n)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(g[off : off+n]), nil
}

// store writes b at r, zeroing the rest of its last word as the kernel
// does (so concatenated fields are zero-padded).
func (g *regs) store(r uint32, b []byte) error {
	n := (len(b) + 3) / 4 * 4
	off, err := slot(r, n)
	if err != nil {
		return err
	}
	clear(g[off : off+n])
	copy(g[off:], b)
	return nil
}

// evalRule runs one rule. It returns the verdict the rule set (nil: go on
// to the next rule) and whether the rule matched: ran to its end or to a
// verdict without an expression breaking it.
func (w *walk) evalRule(c *chain, r *rule) (*expr.Verdict, bool, error) {
	var g regs
	for k, e := range r.exprs {
		v, brk, err := w.evalExpr(c, r, &g, e)
		if err != nil {
			return nil, false, fmt.Errorf("chain %s rule %d (%s), expression %d (%T): %w", c.name, r.ref.Index, r.ref, k, e, err)
		}
		if brk {
			return nil, false, nil
		}
		if v != nil {
			return v, true, nil
		}
	}
	return nil, true, nil
}

// evalExpr runs one expression: it returns a verdict (nil to go on) or
// brk when the rule stops here.
func (w *walk) evalExpr(c *chain, r *rule, g *regs, e expr.Any) (v *expr.Verdict, brk bool, err error) {
	switch e := e.(type) {
	case *expr.Meta:
		return nil, false, w.meta(g, e)
	case *expr.Payload:
		return w.payload(g, e)
	case *expr.Cmp:
		return cmp(g, e)
	case *expr.Bitwise:
		return nil, false, bitwise(g, e)
	case *expr.Ct:
		return w.ct(g, e)
	case *expr.Fib:
		if !e.FlagDADDR || e.FlagSADDR || e.FlagMARK || e.FlagIIF || e.FlagOIF || e.FlagPRESENT || e.ResultOIF || e.ResultADDRTYPE == e.ResultOIFNAME {
			return nil, false, fmt.Errorf("fib other than daddr type or daddr oifname: %w", ErrUnsupported)
		}
		if e.ResultOIFNAME {
			return nil, false, g.store(e.Register, ifName(w.t.fibOifName(w.p.dst)))
		}
		t := uint32(unix.RTN_UNICAST)
		if w.t.local[w.p.dst] {
			t = unix.RTN_LOCAL
		}
		return nil, false, g.store(e.Register, binaryutil.NativeEndian.PutUint32(t))
	case *expr.Lookup:
		return w.lookup(g, e)
	case *expr.Immediate:
		if e.Register == unix.NFT_REG_VERDICT {
			return nil, false, fmt.Errorf("immediate into the verdict register: %w", ErrUnsupported)
		}
		return nil, false, g.store(e.Register, e.Data)
	case *expr.Verdict:
		switch e.Kind {
		case expr.VerdictBreak:
			return nil, true, nil
		case expr.VerdictContinue:
			return nil, false, nil
		case expr.VerdictAccept, expr.VerdictDrop, expr.VerdictJump, expr.VerdictGoto, expr.VerdictReturn:
			v := *e
			return &v, false, nil
		}
		return nil, false, fmt.Errorf("verdict %d: %w", e.Kind, ErrUnsupported)
	case *expr.Counter:
		return nil, false, nil
	case *expr.NAT:
		return w.nat(c, r, g, e)
	case *expr.Masq:
		return w.masq(c, r, e)
	case *expr.Notrack:
		w.notrack(r)
		return nil, false, nil
	case *expr.Reject:
		return w.reject(r, e)
	}
	return nil, false, ErrUnsupported
}

func (w *walk) meta(g *regs, e *expr.Meta) error {
	if e.SourceRegister {
		if e.Key != expr.MetaKeyMARK {
			return fmt.Errorf("meta set key %d: %w", e.Key, ErrUnsupported)
		}
		b, err := g.load(e.Register, 4)
		if err != nil {
			return err
		}
		w.p.mark = binaryutil.NativeEndian.Uint32(b)
		return nil
	}
	switch e.Key {
	case expr.MetaKeyNFPROTO:
		return g.store(e.Register, []byte{w.p.nfproto()})
	case expr.MetaKeyL4PROTO:
		return g.store(e.Register, []byte{w.p.proto})
	case expr.MetaKeyMARK:
		return g.store(e.Register, binaryutil.NativeEndian.PutUint32(w.p.mark))
	case expr.MetaKeyIIFNAME:
		return g.store(e.Register, ifName(w.p.iif))
	case expr.MetaKeyOIFNAME:
		return g.store(e.Register, ifName(w.p.oif))
	}
	return fmt.Errorf("meta key %d: %w", e.Key, ErrUnsupported)
}

func (w *walk) payload(g *regs, e *expr.Payload) (*expr.Verdict, bool, error) {
	if e.OperationType != expr.PayloadLoad {
		return nil, false, fmt.Errorf("payload write: %w", ErrUnsupported)
	}
	var hdr []byte
	switch e.Base {
	case expr.PayloadBaseNetworkHeader:
		hdr = w.p.networkHeader()
	case expr.PayloadBaseTransportHeader:
		hdr = w.p.transportHeader()
	default:
		return nil, false, fmt.Errorf("payload base %d: %w", e.Base, ErrUnsupported)
	}
	if int(e.Offset+e.Len) > len(hdr) {
		return nil, true, nil // beyond the header: the kernel breaks
	}
	return nil, false, g.store(e.DestRegister, hdr[e.Offset:e.Offset+e.Len])
}

func cmp(g *regs, e *expr.Cmp) (*expr.Verdict, bool, error) {
	b, err := g.load(e.Register, len(e.Data))
	if err != nil {
		return nil, false, err
	}
	d := bytes.Compare(b, e.Data)
	var ok bool
	switch e.Op {
	case expr.CmpOpEq:
		ok = d == 0
	case expr.CmpOpNeq:
		ok = d != 0
	case expr.CmpOpLt:
		ok = d < 0
	case expr.CmpOpLte:
		ok = d <= 0
	case expr.CmpOpGt:
		ok = d > 0
	case expr.CmpOpGte:
		ok = d >= 0
	default:
		return nil, false, fmt.Errorf("cmp op %d: %w", e.Op, ErrUnsupported)
	}
	return nil, !ok, nil
}

// bitwise is dst = (src & mask) ^ xor over Len bytes.
func bitwise(g *regs, e *expr.Bitwise) error {
	n := int(e.Len)
	if len(e.Mask) != n || len(e.Xor) != n {
		return fmt.Errorf("bitwise of %d bytes with a %d-byte mask and %d-byte xor: %w", n, len(e.Mask), len(e.Xor), ErrUnsupported)
	}
	b, err := g.load(e.SourceRegister, n)
	if err != nil {
		return err
	}
	for i := range b {
		b[i] = b[i]&e.Mask[i] ^ e.Xor[i]
	}
	return g.store(e.DestRegister, b)
}

// lookup matches a register against a set, or reads a map's verdict or
// data for it.
func (w *walk) lookup(g *regs, e *expr.Lookup) (*expr.Verdict, bool, error) {
	s := w.t.tab.sets[e.SetName]
	if s == nil {
		return nil, false, fmt.Errorf("lookup in set %s: no such set", e.SetName)
	}
	key, err := g.load(e.SourceRegister, int(s.s.KeyType.Bytes))
	if err != nil {
		return nil, false, err
	}
	el, found := s.lookup(key)
	if !e.IsDestRegSet {
		return nil, found == e.Invert, nil
	}
	if e.Invert || !s.s.IsMap {
		return nil, false, fmt.Errorf("map lookup in %s (inverted %t, map %t): %w", e.SetName, e.Invert, s.s.IsMap, ErrUnsupported)
	}
	if !found {
		return nil, true, nil
	}
	if e.DestRegister == unix.NFT_REG_VERDICT {
		if el.VerdictData == nil {
			return nil, false, fmt.Errorf("verdict map %s: element without a verdict", e.SetName)
		}
		v := *el.VerdictData
		return &v, false, nil
	}
	return nil, false, g.store(e.DestRegister, el.Val)
}

// nat applies "dnat to" the address (and port) in its registers.
func (w *walk) nat(c *chain, r *rule, g *regs, e *expr.NAT) (*expr.Verdict, bool, error) {
	if !c.nat {
		return nil, false, fmt.Errorf("nat in chain %s, not of type nat", c.name)
	}
	if e.Type != expr.NATTypeDestNAT || e.RegAddrMin == 0 || e.Prefix {
		return nil, false, fmt.Errorf("nat type %d: only dnat to an address: %w", e.Type, ErrUnsupported)
	}
	if uint8(e.Family) != w.p.nfproto() {
		return nil, false, fmt.Errorf("nat of family %d for a packet of family %d: %w", e.Family, w.p.nfproto(), ErrUnsupported)
	}
	b, err := g.load(e.RegAddrMin, w.p.dst.BitLen()/8)
	if err != nil {
		return nil, false, err
	}
	to, _ := netip.AddrFromSlice(b)
	port := w.p.dport
	if e.RegProtoMin != 0 {
		pb, err := g.load(e.RegProtoMin, 2)
		if err != nil {
			return nil, false, err
		}
		port = binaryutil.BigEndian.Uint16(pb)
	}
	w.dnat(r.ref.String(), netip.AddrPortFrom(to, port))
	return &expr.Verdict{Kind: expr.VerdictAccept}, false, nil
}

// masq masquerades. Why is read from the rule: "mark" when it tests the
// packet mark, else the base name of the last set it looks up.
func (w *walk) masq(c *chain, r *rule, e *expr.Masq) (*expr.Verdict, bool, error) {
	if !c.nat {
		return nil, false, fmt.Errorf("masquerade in chain %s, not of type nat", c.name)
	}
	if e.ToPorts || e.RegProtoMin != 0 {
		return nil, false, fmt.Errorf("masquerade to ports: %w", ErrUnsupported)
	}
	why := ""
	for _, x := range r.exprs {
		switch x := x.(type) {
		case *expr.Meta:
			if x.Key == expr.MetaKeyMARK && !x.SourceRegister && why == "" {
				why = "mark"
			}
		case *expr.Lookup:
			if why != "mark" {
				why = strings.TrimSuffix(strings.TrimSuffix(x.SetName, "-v4"), "-v6")
			}
		}
	}
	w.res.Masquerade, w.res.MasqueradeBy, w.res.FullyRandom = why, r.ref.String(), e.FullyRandom
	w.step("%s: masquerade (%s)", r.ref, why)
	return &expr.Verdict{Kind: expr.VerdictAccept}, false, nil
}

// notrack takes a packet conntrack has not seen out of it; on a packet
// with a conntrack entry (a loopback or IPVS-sent packet) it does
// nothing, as nft_notrack_eval.
func (w *walk) notrack(r *rule) {
	if w.p.ct != ctNone {
		w.step("%s: notrack (no effect: conntrack already attached)", r.ref)
		return
	}
	w.p.ct = ctUntracked
	w.res.NoTrack = true
	w.step("%s: notrack", r.ref)
}

// icmpxCodes names the NFT_REJECT_ICMPX codes.
var icmpxCodes = map[uint8]string{
	unix.NFT_REJECT_ICMPX_NO_ROUTE:         "no-route",
	unix.NFT_REJECT_ICMPX_PORT_UNREACH:     "port-unreachable",
	unix.NFT_REJECT_ICMPX_HOST_UNREACH:     "host-unreachable",
	unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED: "admin-prohibited",
}

func (w *walk) reject(r *rule, e *expr.Reject) (*expr.Verdict, bool, error) {
	switch e.Type {
	case unix.NFT_REJECT_TCP_RST:
		if w.p.proto == unix.IPPROTO_TCP {
			w.stop(RejectTCPReset, r.ref.String())
		} else {
			w.stop(Drop, r.ref.String()) // no reset for a non-TCP packet
		}
	case unix.NFT_REJECT_ICMPX_UNREACH:
		name, ok := icmpxCodes[e.Code]
		if !ok {
			return nil, false, fmt.Errorf("reject icmpx code %d: %w", e.Code, ErrUnsupported)
		}
		w.stop(RejectICMP, r.ref.String())
		w.res.ICMPCode = name
	case unix.NFT_REJECT_ICMP_UNREACH:
		w.stop(RejectICMP, r.ref.String())
		w.res.ICMPCode = fmt.Sprintf("icmp-code-%d", e.Code)
	default:
		return nil, false, fmt.Errorf("reject type %d: %w", e.Type, ErrUnsupported)
	}
	return &expr.Verdict{Kind: expr.VerdictDrop}, false, nil
}

// ct evaluates a ct load of the state or the mark, or a ct mark set
// (nft_ct_get_eval, nft_ct_set_eval). Without a conntrack entry (not
// seen yet, untracked) a mark load breaks the rule and a mark set does
// nothing, as the kernel's.
func (w *walk) ct(g *regs, e *expr.Ct) (*expr.Verdict, bool, error) {
	switch {
	case e.Key == expr.CtKeySTATE && !e.SourceRegister:
		return nil, false, g.store(e.Register, binaryutil.NativeEndian.PutUint32(w.p.ctStateBits()))
	case e.Key != expr.CtKeyMARK:
		return nil, false, fmt.Errorf("ct key %d (set %t): %w", e.Key, e.SourceRegister, ErrUnsupported)
	}
	tracked := w.p.ct == ctNew || w.p.ct == ctEstablished
	if !e.SourceRegister {
		if !tracked {
			return nil, true, nil
		}
		return nil, false, g.store(e.Register, binaryutil.NativeEndian.PutUint32(w.p.ctmark))
	}
	v, err := g.load(e.Register, 4)
	if err != nil {
		return nil, false, err
	}
	if tracked {
		w.p.ctmark = binaryutil.NativeEndian.Uint32(v)
		w.step("ct mark set %#x", w.p.ctmark)
	}
	return nil, false, nil
}
