package nft

import (
	"encoding/binary"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Reading rules back: google/nftables v0.3.0 decodes two attributes of
// a ct expression wrongly.
//   - NFTA_CT_DIRECTION: it wants a 32-bit value, but the kernel dumps
//     one byte (nft_ct_get_dump's nla_put_u8), so GetRules fails for a
//     whole chain if one rule loads "ct original ..." or "ct reply ...".
//     Our own rules load none, but the writer reads other tables'
//     forward chains (forward.go), where an operator's or a firewall's
//     rule may. (Its marshalling, 32 bits big endian, which the kernel
//     reads as a u8 from the first byte, would be right for the original
//     direction only.)
//   - NFTA_CT_SREG: it ignores it, so filter-input's "ct mark set" reads
//     back as a load into register 0.
// rewriteCtExprs rewrites a rule dump's answers before google/nftables
// decodes them, and RuleReader.GetRules restores what the second
// rewrite marks (NewRuleReader).

// nlaHeaderLen is a netlink attribute's header: length and type, 16 bits
// each.
const nlaHeaderLen = 4

// nlaTypeMask strips NLA_F_NESTED and NLA_F_NET_BYTEORDER from a type.
const nlaTypeMask = 0x3fff

// ctSetFlag marks, in the destination register google/nftables decodes,
// a ct expression that was a set from a source register: no register
// number has this bit.
const ctSetFlag = 1 << 31

// rewriteCtExprs returns msg (a NEWRULE message's payload: the nfgenmsg
// header and the rule's attributes) with every ct expression's one-byte
// NFTA_CT_DIRECTION made a big-endian 32-bit value, and its
// NFTA_CT_SREG made an NFTA_CT_DREG with ctSetFlag. Anything it cannot
// parse is left as it is.
func rewriteCtExprs(msg []byte) []byte {
	if len(msg) < 4 {
		return msg
	}
	out := append([]byte(nil), msg[:4]...)
	return rebuildAttrs(out, msg[4:], func(typ uint16, p []byte) (uint16, []byte) {
		if typ != unix.NFTA_RULE_EXPRESSIONS {
			return typ, p
		}
		return typ, rebuildAttrs(nil, p, func(typ uint16, elem []byte) (uint16, []byte) {
			return typ, rebuildAttrs(nil, elem, rewriteCtData(isCtExpr(elem)))
		})
	})
}

// isCtExpr says whether a list element is an expression named "ct".
func isCtExpr(elem []byte) bool {
	ct := false
	eachRuleAttr(elem, func(typ uint16, p []byte) {
		if typ == unix.NFTA_EXPR_NAME && string(p) == "ct\x00" {
			ct = true
		}
	})
	return ct
}

// rewriteCtData rewrites the NFTA_EXPR_DATA of a ct expression.
func rewriteCtData(ct bool) func(uint16, []byte) (uint16, []byte) {
	return func(typ uint16, p []byte) (uint16, []byte) {
		if !ct || typ != unix.NFTA_EXPR_DATA {
			return typ, p
		}
		return typ, rebuildAttrs(nil, p, func(typ uint16, p []byte) (uint16, []byte) {
			switch {
			case typ == unix.NFTA_CT_DIRECTION && len(p) == 1:
				return typ, binary.BigEndian.AppendUint32(nil, uint32(p[0]))
			case typ == unix.NFTA_CT_SREG && len(p) == 4:
				return unix.NFTA_CT_DREG, binary.BigEndian.AppendUint32(nil, binary.BigEndian.Uint32(p)|ctSetFlag)
			}
			return typ, p
		})
	}
}

// restoreCtSets makes each ct expression rewriteCtExprs marked a set
// from its source register again, as the kernel holds it.
func restoreCtSets(rules []*nftables.Rule) {
	for _, r := range rules {
		for _, e := range r.Exprs {
			if c, ok := e.(*expr.Ct); ok && !c.SourceRegister && c.Register&ctSetFlag != 0 {
				c.SourceRegister, c.Register = true, c.Register&^ctSetFlag
			}
		}
	}
}

// eachRuleAttr calls f with the type (flags stripped) and payload of each
// attribute in b; it stops at the first malformed one.
func eachRuleAttr(b []byte, f func(typ uint16, payload []byte)) {
	for len(b) >= nlaHeaderLen {
		n := int(binary.NativeEndian.Uint16(b))
		if n < nlaHeaderLen || n > len(b) {
			return
		}
		f(binary.NativeEndian.Uint16(b[2:])&nlaTypeMask, b[nlaHeaderLen:n])
		b = b[min(nlaAlign(n), len(b)):]
	}
}

// rebuildAttrs appends to out the attributes of b with each type and
// payload replaced by f's answer, keeping each type's flags. A
// malformed tail is copied as it is.
func rebuildAttrs(out, b []byte, f func(typ uint16, payload []byte) (uint16, []byte)) []byte {
	for len(b) >= nlaHeaderLen {
		n := int(binary.NativeEndian.Uint16(b))
		if n < nlaHeaderLen || n > len(b) {
			break
		}
		rawType := binary.NativeEndian.Uint16(b[2:])
		typ, p := f(rawType&nlaTypeMask, b[nlaHeaderLen:n])
		rawType = rawType&^nlaTypeMask | typ
		out = binary.NativeEndian.AppendUint16(out, uint16(nlaHeaderLen+len(p)))
		out = binary.NativeEndian.AppendUint16(out, rawType)
		out = append(out, p...)
		for range nlaAlign(len(p)) - len(p) {
			out = append(out, 0)
		}
		b = b[min(nlaAlign(n), len(b)):]
	}
	return append(out, b...)
}

func nlaAlign(n int) int { return (n + 3) &^ 3 }
