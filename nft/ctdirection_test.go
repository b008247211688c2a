package nft

import (
	"encoding/binary"
	"testing"

	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

func u32be(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

func mustAttrs(t *testing.T, as ...netlink.Attribute) []byte {
	t.Helper()
	b, err := netlink.MarshalAttributes(as)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// exprData returns the NFTA_EXPR_DATA of the i-th expression of a rule
// message.
func exprData(msg []byte, i int) []byte {
	var out []byte
	eachRuleAttr(msg[4:], func(typ uint16, p []byte) {
		if typ != unix.NFTA_RULE_EXPRESSIONS {
			return
		}
		n := 0
		eachRuleAttr(p, func(_ uint16, elem []byte) {
			if n == i {
				eachRuleAttr(elem, func(typ uint16, p []byte) {
					if typ == unix.NFTA_EXPR_DATA {
						out = p
					}
				})
			}
			n++
		})
	})
	return out
}

// TestWidenCtDirectionsMakesTheKernelsByteWhatGoogleNftablesReads: the
// kernel dumps a ct expression's direction as one byte, which
// google/nftables v0.3.0 refuses; widened, it decodes it. Another
// expression's attribute of the same number and size is left alone.
func TestWidenCtDirectionsMakesTheKernelsByteWhatGoogleNftablesReads(t *testing.T) {
	ct := mustAttrs(t,
		netlink.Attribute{Type: unix.NFTA_CT_DREG, Data: u32be(unix.NFT_REG_1)},
		netlink.Attribute{Type: unix.NFTA_CT_KEY, Data: u32be(uint32(expr.CtKeyPROTODST))},
		netlink.Attribute{Type: unix.NFTA_CT_DIRECTION, Data: []byte{1}})
	other := mustAttrs(t, netlink.Attribute{Type: 3, Data: []byte{7}})
	elem := func(name string, data []byte) netlink.Attribute {
		return netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_LIST_ELEM, Data: mustAttrs(t,
			netlink.Attribute{Type: unix.NFTA_EXPR_NAME, Data: []byte(name + "\x00")},
			netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_EXPR_DATA, Data: data})}
	}
	msg := append([]byte{unix.NFPROTO_INET, 0, 0, 0}, mustAttrs(t,
		netlink.Attribute{Type: unix.NFTA_RULE_TABLE, Data: []byte("t\x00")},
		netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_RULE_EXPRESSIONS, Data: mustAttrs(t,
			elem("ct", ct), elem("other", other))})...)

	if err := expr.Unmarshal(unix.NFPROTO_INET, exprData(msg, 0), &expr.Ct{}); err == nil {
		t.Fatal("google/nftables decoded the kernel's one-byte direction: the widening is no longer needed")
	}
	got := widenCtDirections(msg)
	var c expr.Ct
	if err := expr.Unmarshal(unix.NFPROTO_INET, exprData(got, 0), &c); err != nil {
		t.Fatalf("widened: %v", err)
	}
	if c.Direction != 1 || c.Key != expr.CtKeyPROTODST || c.Register != unix.NFT_REG_1 {
		t.Errorf("widened ct: %+v, want direction 1, key proto-dst, reg 1", c)
	}
	if o := exprData(got, 1); string(o) != string(other) {
		t.Errorf("the other expression's data changed: %x, want %x", o, other)
	}
	if string(got[:4]) != string(msg[:4]) {
		t.Errorf("nfgenmsg header changed")
	}
}
