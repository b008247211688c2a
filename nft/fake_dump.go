package nft

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// Dump prints every table of the fake, sorted: tables by family and name,
// then each table's sets (with elements, decoded by key type) and chains
// (with their rules' expressions, in the style of `nft --debug=netlink`),
// by name. Anonymous sets are printed inside the lookups that use them.
func (f *Fake) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	keys := slices.Collect(maps.Keys(f.tables))
	slices.SortFunc(keys, func(a, b fakeTableKey) int {
		if c := cmp.Compare(a.family, b.family); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	var b strings.Builder
	for _, k := range keys {
		t := f.tables[k]
		fmt.Fprintf(&b, "table %s %s\n", familyName(k.family), k.name)
		for _, name := range sortedNames(t.sets) {
			if s := t.sets[name]; !s.set.Anonymous {
				dumpSet(&b, s)
			}
		}
		for _, name := range sortedNames(t.chains) {
			dumpChain(&b, t, t.chains[name])
		}
	}
	return b.String()
}

func sortedNames[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func dumpSet(b *strings.Builder, s *fakeSet) {
	kind := "set"
	typ := s.set.KeyType.Name
	if s.set.IsMap {
		kind = "map"
		typ += " : " + s.set.DataType.Name
	}
	var flags []string
	if s.set.Interval {
		flags = append(flags, "interval")
	}
	if s.set.Concatenation {
		flags = append(flags, "concat")
	}
	fmt.Fprintf(b, "\t%s %s type %s", kind, s.set.Name, typ)
	if len(flags) > 0 {
		fmt.Fprintf(b, " flags %s", strings.Join(flags, ","))
	}
	b.WriteString("\n")
	for _, e := range sortedElements(s) {
		fmt.Fprintf(b, "\t\t%s\n", formatSetElement(&s.set, e))
	}
}

// sortedElements orders a set's elements by key bytes, then interval end.
func sortedElements(s *fakeSet) []nftables.SetElement {
	keys := slices.Sorted(maps.Keys(s.elems))
	out := make([]nftables.SetElement, len(keys))
	for i, k := range keys {
		out[i] = s.elems[k]
	}
	return out
}

func dumpChain(b *strings.Builder, t *fakeTable, c *fakeChain) {
	fmt.Fprintf(b, "\tchain %s", c.chain.Name)
	if c.chain.Hooknum != nil {
		prio := int32(0)
		if c.chain.Priority != nil {
			prio = int32(*c.chain.Priority)
		}
		policy := "accept"
		if c.chain.Policy != nil && *c.chain.Policy == nftables.ChainPolicyDrop {
			policy = "drop"
		}
		fmt.Fprintf(b, " type %s hook %s priority %d policy %s", c.chain.Type, hookName(uint32(*c.chain.Hooknum)), prio, policy)
	}
	b.WriteString("\n")
	for _, r := range c.rules {
		parts := make([]string, len(r.exprs))
		for i, e := range r.exprs {
			parts[i] = "[ " + formatExpr(t, e) + " ]"
		}
		if c, ok := userdata.GetString(r.userData, userdata.TypeComment); ok {
			parts = append(parts, fmt.Sprintf("comment %q", c))
		}
		fmt.Fprintf(b, "\t\t%s\n", strings.Join(parts, " "))
	}
}

func familyName(f nftables.TableFamily) string {
	switch f {
	case nftables.TableFamilyINet:
		return "inet"
	case nftables.TableFamilyIPv4:
		return "ip"
	case nftables.TableFamilyIPv6:
		return "ip6"
	case nftables.TableFamilyARP:
		return "arp"
	case nftables.TableFamilyBridge:
		return "bridge"
	case nftables.TableFamilyNetdev:
		return "netdev"
	}
	return strconv.Itoa(int(f))
}

// formatSetElement decodes an element by its set's key and data types.
func formatSetElement(set *nftables.Set, e nftables.SetElement) string {
	s := formatKey(set.KeyType, e.Key)
	if len(e.KeyEnd) > 0 {
		s += " - " + formatKey(set.KeyType, e.KeyEnd)
	}
	if set.IsMap && e.VerdictData == nil && len(e.Val) > 0 {
		s += " : " + formatKey(set.DataType, e.Val)
	}
	if e.IntervalEnd {
		s += " (interval end)"
	}
	if v := e.VerdictData; v != nil {
		s += " : " + formatVerdict(v)
	}
	return s
}

func formatKey(keyType nftables.SetDatatype, key []byte) string {
	types := []nftables.SetDatatype{keyType}
	pad := false
	if strings.Contains(keyType.Name, " . ") {
		types, pad = nftables.ConcatSetTypeElements(keyType), true
	}
	parts := make([]string, 0, len(types))
	for _, t := range types {
		n := int(t.Bytes)
		if pad {
			n = (n + 3) &^ 3
		}
		if n == 0 || n > len(key) {
			return fmt.Sprintf("0x%x", key)
		}
		parts = append(parts, formatTyped(t, key[:t.Bytes]))
		key = key[n:]
	}
	return strings.Join(parts, " . ")
}

func formatTyped(t nftables.SetDatatype, b []byte) string {
	switch t.Name {
	case nftables.TypeIPAddr.Name, nftables.TypeIP6Addr.Name:
		if a, ok := netip.AddrFromSlice(b); ok {
			return a.String()
		}
	case nftables.TypeInetProto.Name:
		return protoName(b[0])
	case nftables.TypeInetService.Name:
		return strconv.Itoa(int(binary.BigEndian.Uint16(b)))
	}
	return fmt.Sprintf("0x%x", b)
}

func formatVerdict(v *expr.Verdict) string {
	switch v.Kind {
	case expr.VerdictAccept:
		return "accept"
	case expr.VerdictDrop:
		return "drop"
	case expr.VerdictReturn:
		return "return"
	case expr.VerdictContinue:
		return "continue"
	case expr.VerdictGoto:
		return "goto " + v.Chain
	case expr.VerdictJump:
		return "jump " + v.Chain
	}
	return fmt.Sprintf("verdict %d", v.Kind)
}

// formatData prints register data as nft's debug output does: 32-bit
// words in host byte order, or bytes when shorter.
func formatData(d []byte) string {
	if len(d) == 0 || len(d)%4 != 0 {
		return fmt.Sprintf("0x%x", d)
	}
	words := make([]string, 0, len(d)/4)
	for i := 0; i < len(d); i += 4 {
		words = append(words, fmt.Sprintf("0x%08x", binaryutil.NativeEndian.Uint32(d[i:i+4])))
	}
	return strings.Join(words, " ")
}

var metaKeyNames = map[expr.MetaKey]string{
	expr.MetaKeyL4PROTO: "l4proto", expr.MetaKeyNFPROTO: "nfproto", expr.MetaKeyMARK: "mark",
	expr.MetaKeyIIFNAME: "iifname", expr.MetaKeyOIFNAME: "oifname",
}

var cmpOpNames = map[expr.CmpOp]string{
	expr.CmpOpEq: "eq", expr.CmpOpNeq: "neq", expr.CmpOpLt: "lt", expr.CmpOpLte: "lte", expr.CmpOpGt: "gt", expr.CmpOpGte: "gte",
}

var payloadBaseNames = map[expr.PayloadBase]string{
	expr.PayloadBaseLLHeader: "link", expr.PayloadBaseNetworkHeader: "network", expr.PayloadBaseTransportHeader: "transport",
}

func formatExpr(t *fakeTable, e expr.Any) string {
	switch e := e.(type) {
	case *expr.Meta:
		name := metaKeyNames[e.Key]
		if name == "" {
			name = strconv.Itoa(int(e.Key))
		}
		if e.SourceRegister {
			return fmt.Sprintf("meta set %s with reg %d", name, e.Register)
		}
		return fmt.Sprintf("meta load %s => reg %d", name, e.Register)
	case *expr.Cmp:
		return fmt.Sprintf("cmp %s reg %d %s", cmpOpNames[e.Op], e.Register, formatData(e.Data))
	case *expr.Payload:
		return fmt.Sprintf("payload load %db @ %s header + %d => reg %d", e.Len, payloadBaseNames[e.Base], e.Offset, e.DestRegister)
	case *expr.Bitwise:
		return fmt.Sprintf("bitwise reg %d = ( reg %d & %s ) ^ %s", e.DestRegister, e.SourceRegister, formatData(e.Mask), formatData(e.Xor))
	case *expr.Ct:
		switch {
		case e.Key == expr.CtKeyMARK && e.SourceRegister:
			return fmt.Sprintf("ct set mark with reg %d", e.Register)
		case e.SourceRegister:
			return fmt.Sprintf("ct set %d with reg %d", e.Key, e.Register)
		}
		switch e.Key {
		case expr.CtKeyMARK:
			return fmt.Sprintf("ct load mark => reg %d", e.Register)
		case expr.CtKeySTATE:
			return fmt.Sprintf("ct load state => reg %d", e.Register)
		case expr.CtKeyPROTOCOL:
			return fmt.Sprintf("ct load protocol => reg %d", e.Register)
		case expr.CtKeyDST, expr.CtKeyPROTODST:
			name := map[expr.CtKey]string{expr.CtKeyDST: "dst", expr.CtKeyPROTODST: "proto_dst"}[e.Key]
			return fmt.Sprintf("ct load %s => reg %d , dir %s", name, e.Register, [2]string{"original", "reply"}[e.Direction&1])
		}
		return fmt.Sprintf("ct load %d => reg %d", e.Key, e.Register)
	case *expr.Lookup:
		return formatLookup(t, e)
	case *expr.Notrack:
		return "notrack"
	case *expr.Fib:
		if e.FlagDADDR && e.ResultADDRTYPE && !e.FlagSADDR && !e.FlagIIF && !e.FlagOIF {
			return fmt.Sprintf("fib daddr type => reg %d", e.Register)
		}
		if e.FlagDADDR && e.ResultOIFNAME && !e.FlagSADDR && !e.FlagIIF && !e.FlagOIF {
			return fmt.Sprintf("fib daddr oifname => reg %d", e.Register)
		}
		return fmt.Sprintf("fib %+v", *e)
	case *expr.Masq:
		if e.FullyRandom {
			return "masq flags fully-random"
		}
		return "masq"
	case *expr.Reject:
		return fmt.Sprintf("reject type %d code %d", e.Type, e.Code)
	case *expr.Verdict:
		return "immediate " + formatVerdict(e)
	case *expr.Counter:
		return "counter"
	case *expr.NAT:
		return formatNAT(e)
	}
	return fmt.Sprintf("%T %+v", e, e)
}

func formatLookup(t *fakeTable, e *expr.Lookup) string {
	set := e.SetName
	if s := t.sets[e.SetName]; s != nil && s.set.Anonymous {
		var elems []string
		for _, el := range sortedElements(s) {
			elems = append(elems, formatSetElement(&s.set, el))
		}
		set = "{ " + strings.Join(elems, ", ") + " }"
	}
	op := ""
	if e.Invert {
		op = "!= "
	}
	s := fmt.Sprintf("lookup reg %d %sset %s", e.SourceRegister, op, set)
	if e.IsDestRegSet {
		if e.DestRegister == unix.NFT_REG_VERDICT {
			s += " dreg verdict"
		} else {
			s += fmt.Sprintf(" dreg %d", e.DestRegister)
		}
	}
	return s
}

// formatNAT prints a nat expression as nft --debug=netlink does.
func formatNAT(e *expr.NAT) string {
	kind := "snat"
	if e.Type == expr.NATTypeDestNAT {
		kind = "dnat"
	}
	fam := map[uint32]string{unix.NFPROTO_IPV4: "ip", unix.NFPROTO_IPV6: "ip6"}[e.Family]
	s := fmt.Sprintf("nat %s %s addr_min reg %d addr_max reg %d", kind, fam, e.RegAddrMin, e.RegAddrMax)
	if e.RegProtoMin != 0 {
		s += fmt.Sprintf(" proto_min reg %d proto_max reg %d", e.RegProtoMin, e.RegProtoMax)
	}
	if e.Specified {
		s += " flags proto-specified"
	}
	return s
}
