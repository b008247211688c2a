package nft

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// Reading rules back: google/nftables v0.3.0 decodes a ct expression's
// NFTA_CT_DIRECTION as a 32-bit value, but the kernel dumps it as one
// byte (nft_ct_get_dump's nla_put_u8), so GetRules fails for a whole
// chain if one rule loads "ct original ..." or "ct reply ...". Our own
// rules load none, but the writer reads other tables' forward chains
// (forward.go), where an operator's or a firewall's rule may. Its
// marshalling (32 bits big endian, which the kernel reads as a u8 from
// the first byte) would be right for the original direction only.
// widenCtDirections rewrites a rule dump's answers before
// google/nftables decodes them (NewRuleReader).

// nlaHeaderLen is a netlink attribute's header: length and type, 16 bits
// each.
const nlaHeaderLen = 4

// nlaTypeMask strips NLA_F_NESTED and NLA_F_NET_BYTEORDER from a type.
const nlaTypeMask = 0x3fff

// widenCtDirections returns msg (a NEWRULE message's payload: the
// nfgenmsg header and the rule's attributes) with every ct expression's
// one-byte NFTA_CT_DIRECTION made a big-endian 32-bit value. Anything it
// cannot parse is left as it is.
func widenCtDirections(msg []byte) []byte {
	if len(msg) < 4 {
		return msg
	}
	out := append([]byte(nil), msg[:4]...)
	return rebuildAttrs(out, msg[4:], func(typ uint16, p []byte) []byte {
		if typ != unix.NFTA_RULE_EXPRESSIONS {
			return p
		}
		return rebuildAttrs(nil, p, func(_ uint16, elem []byte) []byte {
			return rebuildAttrs(nil, elem, widenCtData(isCtExpr(elem)))
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

// widenCtData rewrites the NFTA_EXPR_DATA of a ct expression.
func widenCtData(ct bool) func(uint16, []byte) []byte {
	return func(typ uint16, p []byte) []byte {
		if !ct || typ != unix.NFTA_EXPR_DATA {
			return p
		}
		return rebuildAttrs(nil, p, func(typ uint16, p []byte) []byte {
			if typ == unix.NFTA_CT_DIRECTION && len(p) == 1 {
				return binary.BigEndian.AppendUint32(nil, uint32(p[0]))
			}
			return p
		})
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

// rebuildAttrs appends to out the attributes of b with each payload
// replaced by f's answer, keeping each type's flags. A malformed tail
// is copied as it is.
func rebuildAttrs(out, b []byte, f func(typ uint16, payload []byte) []byte) []byte {
	for len(b) >= nlaHeaderLen {
		n := int(binary.NativeEndian.Uint16(b))
		if n < nlaHeaderLen || n > len(b) {
			break
		}
		rawType := binary.NativeEndian.Uint16(b[2:])
		p := f(rawType&nlaTypeMask, b[nlaHeaderLen:n])
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
