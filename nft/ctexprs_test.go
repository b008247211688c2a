package nft

import (
	"encoding/binary"
	"testing"

	"github.com/google/nftables"
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

// TestRewriteCtExprsMakesTheKernelsDirectionByteWhatGoogleNftablesReads: the
// kernel dumps a ct expression's direction as one byte, which
// google/nftables v0.3.0 refuses; widened, it decodes it. Another
// expression's attribute of the same number and size is left alone.
func TestRewriteCtExprsMakesTheKernelsDirectionByteWhatGoogleNftablesReads(t *testing.T) {
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
	got := rewriteCtExprs(msg)
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

// TestRewriteCtExprsKeepsACtSet: google/nftables v0.3.0 ignores a ct
// expression's source register, so "ct mark set" decodes as a load into
// register 0; rewritten and restored, it is the set we wrote.
func TestRewriteCtExprsKeepsACtSet(t *testing.T) {
	set := &expr.Ct{Key: expr.CtKeyMARK, Register: unix.NFT_REG_1, SourceRegister: true}
	elem, err := expr.Marshal(unix.NFPROTO_INET, set)
	if err != nil {
		t.Fatal(err)
	}
	msg := append([]byte{unix.NFPROTO_INET, 0, 0, 0}, mustAttrs(t,
		netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_RULE_EXPRESSIONS, Data: mustAttrs(t,
			netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_LIST_ELEM, Data: elem})})...)

	var plain expr.Ct
	if err := expr.Unmarshal(unix.NFPROTO_INET, exprData(msg, 0), &plain); err != nil || plain.SourceRegister || plain.Register != 0 {
		t.Fatalf("google/nftables decoded the ct set as %+v (%v): the rewrite is no longer needed", plain, err)
	}
	var got expr.Ct
	if err := expr.Unmarshal(unix.NFPROTO_INET, exprData(rewriteCtExprs(msg), 0), &got); err != nil {
		t.Fatalf("rewritten: %v", err)
	}
	restoreCtSets([]*nftables.Rule{{Exprs: []expr.Any{&got}}})
	if got != *set {
		t.Errorf("read back %+v, want %+v", got, *set)
	}
}

// FuzzRewriteCtExprs feeds arbitrary rule messages to the rewriter
// that runs on every rule the kernel dumps: it never panics, and
// rewriting twice changes nothing more (a widened direction is no
// longer one byte, a marked source register is no longer one).
func FuzzRewriteCtExprs(f *testing.F) {
	ct := func(typ uint16, v []byte) []byte {
		data, _ := netlink.MarshalAttributes([]netlink.Attribute{
			{Type: unix.NFTA_CT_KEY, Data: u32be(unix.NFT_CT_STATE)},
			{Type: typ, Data: v},
		})
		elem, _ := netlink.MarshalAttributes([]netlink.Attribute{
			{Type: unix.NFTA_EXPR_NAME, Data: []byte("ct\x00")},
			{Type: unix.NLA_F_NESTED | unix.NFTA_EXPR_DATA, Data: data},
		})
		list, _ := netlink.MarshalAttributes([]netlink.Attribute{{Type: unix.NLA_F_NESTED | unix.NFTA_LIST_ELEM, Data: elem}})
		msg, _ := netlink.MarshalAttributes([]netlink.Attribute{
			{Type: unix.NFTA_RULE_TABLE, Data: []byte("t\x00")},
			{Type: unix.NLA_F_NESTED | unix.NFTA_RULE_EXPRESSIONS, Data: list},
		})
		return append([]byte{unix.NFPROTO_INET, 0, 0, 0}, msg...)
	}
	f.Add(ct(unix.NFTA_CT_DIRECTION, []byte{0}))
	f.Add(ct(unix.NFTA_CT_DIRECTION, []byte{1}))
	f.Add(ct(unix.NFTA_CT_DIRECTION, u32be(0)))
	f.Add(ct(unix.NFTA_CT_SREG, u32be(unix.NFT_REG_1)))
	f.Add([]byte{2, 0, 0, 0, 5, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, msg []byte) {
		once := rewriteCtExprs(msg)
		if len(once) < min(len(msg), 4) {
			t.Fatalf("rewritten message of %d bytes is %d bytes", len(msg), len(once))
		}
		if twice := rewriteCtExprs(once); string(twice) != string(once) {
			t.Fatalf("rewriting twice changed the message:\n once %x\ntwice %x", once, twice)
		}
	})
}
