package nft

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The fake answers like the kernel: each case queues messages on a fake
// holding table inet t with chain c, regular chain r, set s (ipv4_addr
// holding 10.0.0.1), verdict map m (ipv4_addr, 10.0.0.1 : drop) and
// concatenated interval set i (ipv4_addr . ipv4_addr, 10.0.0.1 . 10.1.0.0
// - 10.0.0.1 . 10.1.255.255), then flushes.
func TestFakeIsKernelFaithful(t *testing.T) {
	tbl := &nftables.Table{Family: nftables.TableFamilyINet, Name: "t"}
	base := &nftables.Chain{Name: "c", Table: tbl, Type: nftables.ChainTypeFilter, Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter}
	regular := &nftables.Chain{Name: "r", Table: tbl}
	set := &nftables.Set{Table: tbl, Name: "s", KeyType: nftables.TypeIPAddr}
	vmap := &nftables.Set{Table: tbl, Name: "m", KeyType: nftables.TypeIPAddr, IsMap: true, DataType: nftables.TypeVerdict}
	ivl := &nftables.Set{Table: tbl, Name: "i", KeyType: nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeIPAddr), Interval: true, Concatenation: true}
	ip := func(s string) []byte { return addr(s).AsSlice() }
	span := func(a, from, to string) nftables.SetElement {
		return nftables.SetElement{Key: append(ip(a), ip(from)...), KeyEnd: append(ip(a), ip(to)...)}
	}
	drop := &expr.Verdict{Kind: expr.VerdictDrop}
	for _, tc := range []struct {
		name  string
		queue func(f *Fake)
		want  error // nil: the batch applies
	}{
		{"add existing table is no error", func(f *Fake) { f.AddTable(tbl) }, nil},
		{"delete missing table is ENOENT", func(f *Fake) { f.DelTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "x"}) }, unix.ENOENT},
		{"same name in another family is another table", func(f *Fake) { f.DelTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "t"}) }, unix.ENOENT},
		{"add, delete, add in one batch", func(f *Fake) { f.AddTable(tbl); f.DelTable(tbl); f.AddTable(tbl); f.AddChain(base) }, nil},
		{"chain in a missing table is ENOENT", func(f *Fake) { f.AddChain(&nftables.Chain{Name: "c", Table: &nftables.Table{Name: "x"}}) }, unix.ENOENT},
		{"rule in a missing chain is ENOENT", func(f *Fake) { f.AddRule(&nftables.Rule{Table: tbl, Chain: &nftables.Chain{Name: "x"}}) }, unix.ENOENT},
		{"lookup of a missing set is ENOENT", func(f *Fake) {
			f.AddRule(&nftables.Rule{Table: tbl, Chain: base, Exprs: []expr.Any{&expr.Lookup{SourceRegister: 1, SetName: "x"}}})
		}, unix.ENOENT},
		{"vmap lookup of a plain set is EINVAL", func(f *Fake) {
			f.AddRule(&nftables.Rule{Table: tbl, Chain: base, Exprs: []expr.Any{&expr.Lookup{SourceRegister: 1, SetName: "s", IsDestRegSet: true}}})
		}, unix.EINVAL},
		{"goto a missing chain is ENOENT", func(f *Fake) {
			f.AddRule(&nftables.Rule{Table: tbl, Chain: base, Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictGoto, Chain: "x"}}})
		}, unix.ENOENT},
		{"goto a base chain is EOPNOTSUPP", func(f *Fake) {
			_ = f.SetAddElements(vmap, []nftables.SetElement{{Key: ip("10.0.0.2"), VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: "c"}}})
		}, unix.EOPNOTSUPP},
		{"element of a missing set is ENOENT", func(f *Fake) {
			_ = f.SetAddElements(&nftables.Set{Table: tbl, Name: "x", KeyType: nftables.TypeIPAddr}, []nftables.SetElement{{Key: ip("10.0.0.1")}})
		}, unix.ENOENT},
		{"key of the wrong length is EINVAL", func(f *Fake) { _ = f.SetAddElements(set, []nftables.SetElement{{Key: []byte{1}}}) }, unix.EINVAL},
		{"existing element is no error", func(f *Fake) { _ = f.SetAddElements(set, []nftables.SetElement{{Key: ip("10.0.0.1")}}) }, nil},
		{"existing map element, same verdict, is no error", func(f *Fake) {
			_ = f.SetAddElements(vmap, []nftables.SetElement{{Key: ip("10.0.0.1"), VerdictData: drop}})
		}, nil},
		{"existing map element, other verdict, is EBUSY", func(f *Fake) {
			_ = f.SetAddElements(vmap, []nftables.SetElement{{Key: ip("10.0.0.1"), VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: "r"}}})
		}, unix.EBUSY},
		{"delete then add changes a map value", func(f *Fake) {
			_ = f.SetDeleteElements(vmap, []nftables.SetElement{{Key: ip("10.0.0.1")}})
			_ = f.SetAddElements(vmap, []nftables.SetElement{{Key: ip("10.0.0.1"), VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: "r"}}})
		}, nil},
		{"map element without a verdict is EINVAL", func(f *Fake) { _ = f.SetAddElements(vmap, []nftables.SetElement{{Key: ip("10.0.0.3")}}) }, unix.EINVAL},
		{"delete missing element is ENOENT", func(f *Fake) { _ = f.SetDeleteElements(set, []nftables.SetElement{{Key: ip("10.0.0.9")}}) }, unix.ENOENT},
		{"overlapping concatenated interval is ENOTEMPTY", func(f *Fake) {
			_ = f.SetAddElements(ivl, []nftables.SetElement{span("10.0.0.1", "10.1.128.0", "10.2.0.0")})
		}, unix.ENOTEMPTY},
		{"same concatenated interval is no error", func(f *Fake) {
			_ = f.SetAddElements(ivl, []nftables.SetElement{span("10.0.0.1", "10.1.0.0", "10.1.255.255")})
		}, nil},
		{"disjoint concatenated interval", func(f *Fake) {
			_ = f.SetAddElements(ivl, []nftables.SetElement{span("10.0.0.1", "10.2.0.0", "10.2.0.255")})
		}, nil},
		{"concatenated interval without an end is EINVAL", func(f *Fake) {
			_ = f.SetAddElements(ivl, []nftables.SetElement{{Key: append(ip("10.0.0.2"), ip("10.0.0.2")...)}})
		}, unix.EINVAL},
		{"a failure undoes the whole batch", func(f *Fake) {
			f.DelTable(tbl)
			_ = f.SetDeleteElements(set, []nftables.SetElement{{Key: ip("10.0.0.1")}})
		}, unix.ENOENT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFake()
			f.AddTable(tbl)
			f.AddChain(base)
			f.AddChain(regular)
			for _, s := range []*nftables.Set{set, vmap, ivl} {
				if err := f.AddSet(s, nil); err != nil {
					t.Fatal(err)
				}
			}
			_ = f.SetAddElements(set, []nftables.SetElement{{Key: ip("10.0.0.1")}})
			_ = f.SetAddElements(vmap, []nftables.SetElement{{Key: ip("10.0.0.1"), VerdictData: drop}})
			_ = f.SetAddElements(ivl, []nftables.SetElement{span("10.0.0.1", "10.1.0.0", "10.1.255.255")})
			if err := f.Flush(); err != nil {
				t.Fatalf("setup: %v", err)
			}
			before := f.Dump()
			tc.queue(f)
			err := f.Flush()
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Flush: %v, want %v", err, tc.want)
			}
			if err != nil && f.Dump() != before {
				t.Errorf("failed batch changed the state:\n%s", f.Dump())
			}
			if err := f.Flush(); err != nil {
				t.Errorf("Flush of an empty queue after a batch: %v", err)
			}
		})
	}
}

func TestFakeAnonymousSets(t *testing.T) {
	f := NewFake()
	tbl := f.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "t"})
	ch := f.AddChain(&nftables.Chain{Name: "c", Table: tbl})
	if err := f.AddSet(&nftables.Set{Table: tbl, Name: anonSetName, Anonymous: true, KeyType: nftables.TypeInetProto}, nil); err == nil {
		t.Errorf("a non-constant anonymous set was accepted")
	}
	s := &nftables.Set{Table: tbl, ID: 7, Name: anonSetName, Anonymous: true, Constant: true, KeyType: nftables.TypeInetProto}
	if err := f.AddSet(s, []nftables.SetElement{{Key: []byte{unix.IPPROTO_UDP}}, {Key: []byte{unix.IPPROTO_TCP}}}); err != nil {
		t.Fatal(err)
	}
	f.AddRule(&nftables.Rule{Table: tbl, Chain: ch, Exprs: []expr.Any{&expr.Lookup{SourceRegister: 1, SetName: anonSetName, SetID: 7}}})
	if err := f.SetAddElements(s, nil); err == nil {
		t.Errorf("adding to an anonymous set was accepted")
	}
	if err := f.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := f.Dump(), "[ lookup reg 1 set { tcp, udp } ]"; !strings.Contains(got, want) {
		t.Errorf("Dump:\n%s\nwant the anonymous set inline: %s", got, want)
	}
}
