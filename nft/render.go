package nft

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"golang.org/x/sys/unix"
)

// Render returns the whole table a Resync of plan programs, in the syntax
// of `nft list table inet kube-ipvs-proxy`: sets and maps with their
// elements, then chains with their rules, each sorted by name, elements
// sorted by key. It does no I/O.
func Render(cfg Config, plan policy.Plan) string {
	cfg = cfg.withDefaults()
	elems := mirrorOf(plan).elements()
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {\n", TableName)
	i := 0
	for id := setID(0); int(id) < numSets(); id++ {
		var texts []string
		if id.def().base == setClusterCIDRs {
			for _, r := range mergeRanges(cfg.ClusterCIDRs, id.family()) {
				texts = append(texts, formatRange(r.first, r.last))
			}
		}
		for ; i < len(elems) && elems[i].id.set == id; i++ {
			texts = append(texts, formatElement(elems[i].id, elems[i].v))
		}
		renderSet(&b, id, texts)
	}
	specs := ruleSpecs(cfg)
	for _, c := range sortedChains() {
		fmt.Fprintf(&b, "\n\tchain %s {\n", c.name)
		if c.hook != nil {
			fmt.Fprintf(&b, "\t\ttype %s hook %s priority %s; policy accept;\n", c.typ, hookName(uint32(*c.hook)), priorityName(uint32(*c.hook), int32(c.priority)))
		}
		for _, r := range specs {
			if r.chain == c.name {
				fmt.Fprintf(&b, "\t\t%s\n", r.text)
			}
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String()
}

func renderSet(b *strings.Builder, id setID, elems []string) {
	def, fam := id.def(), id.family()
	kind := "set"
	if def.verdictMap || def.data != nil {
		kind = "map"
	}
	types := make([]string, len(def.fields))
	for i, f := range def.fields {
		types[i] = f.datatype(fam).Name
	}
	typ := strings.Join(types, " . ")
	if def.verdictMap {
		typ += " : verdict"
	}
	if def.data != nil {
		data := make([]string, len(def.data))
		for i, f := range def.data {
			data[i] = f.datatype(fam).Name
		}
		typ += " : " + strings.Join(data, " . ")
	}
	if id > 0 {
		b.WriteString("\n")
	}
	fmt.Fprintf(b, "\t%s %s {\n\t\ttype %s\n", kind, id.name(), typ)
	if def.interval {
		b.WriteString("\t\tflags interval\n")
	}
	fmt.Fprintf(b, "\t\tcomment %q\n", def.comment)
	if len(elems) > 0 {
		fmt.Fprintf(b, "\t\telements = { %s }\n", strings.Join(elems, ",\n\t\t\t     "))
	}
	b.WriteString("\t}\n")
}

// formatElement prints an element as nft does: fields joined by " . ",
// an interval field as a prefix or a range, a map value after " : ".
func formatElement(id elemID, v value) string {
	def, fam := id.set.def(), id.set.family()
	n := id.set.keyLen()
	key := []byte(id.key[:n])
	var end []byte
	if len(id.key) > n {
		end = []byte(id.key[n:])
	}
	parts := make([]string, len(def.fields))
	off := 0
	for i, f := range def.fields {
		sz := f.size(fam)
		parts[i] = formatField(f, key[off:off+sz])
		if end != nil && string(end[off:off+sz]) != string(key[off:off+sz]) {
			first, _ := netip.AddrFromSlice(key[off : off+sz])
			last, _ := netip.AddrFromSlice(end[off : off+sz])
			parts[i] = formatRange(first, last)
		}
		off += sz
	}
	s := strings.Join(parts, " . ")
	if v.data != "" {
		data, off := make([]string, len(def.data)), 0
		for i, f := range def.data {
			sz := f.size(fam)
			data[i] = formatField(f, []byte(v.data[off:off+sz]))
			off += sz
		}
		s += " : " + strings.Join(data, " . ")
	}
	switch v.verdict {
	case rejectGoto:
		s += " : goto " + chainRejectPacket
	case dropVerdict:
		s += " : drop"
	}
	return s
}

// formatField prints one key field.
func formatField(f field, b []byte) string {
	switch f {
	case fieldProto:
		return protoName(b[0])
	case fieldPort:
		return strconv.Itoa(int(b[0])<<8 | int(b[1]))
	}
	a, ok := netip.AddrFromSlice(b)
	if !ok {
		return fmt.Sprintf("%x", b)
	}
	return a.String()
}

// protoName is nft's name of an IP protocol number: tcp, udp, sctp, or
// the number.
func protoName(p byte) string {
	if proto, ok := policy.ProtocolOfNumber(p); ok {
		return strings.ToLower(string(proto))
	}
	return strconv.Itoa(int(p))
}

// formatRange prints first-last as a prefix when it is one.
func formatRange(first, last netip.Addr) string {
	for bits := 0; bits <= first.BitLen(); bits++ {
		p := netip.PrefixFrom(first, bits)
		if p.Masked().Addr() == first && lastAddr(p) == last {
			if bits == first.BitLen() {
				return first.String()
			}
			return p.String()
		}
	}
	return first.String() + "-" + last.String()
}

func sortedChains() []chainDef {
	cs := slices.Clone(chainDefs)
	slices.SortFunc(cs, func(a, b chainDef) int { return strings.Compare(a.name, b.name) })
	return cs
}

func hookName(h uint32) string {
	switch h {
	case unix.NF_INET_PRE_ROUTING:
		return "prerouting"
	case unix.NF_INET_LOCAL_IN:
		return "input"
	case unix.NF_INET_FORWARD:
		return "forward"
	case unix.NF_INET_LOCAL_OUT:
		return "output"
	case unix.NF_INET_POST_ROUTING:
		return "postrouting"
	}
	return strconv.Itoa(int(h))
}

// priorityName prints the standard names of the inet family's
// priorities. nft accepts dstnat only on prerouting and srcnat only on
// postrouting (nft(8), "standard priority names"), so elsewhere the number
// is printed and `nft -f` reads the rendering back.
func priorityName(hook uint32, p int32) string {
	switch {
	case p == -300:
		return "raw"
	case p == -150:
		return "mangle"
	case p == -100 && hook == unix.NF_INET_PRE_ROUTING:
		return "dstnat"
	case p == 0:
		return "filter"
	case p == 50:
		return "security"
	case p == 100 && hook == unix.NF_INET_POST_ROUTING:
		return "srcnat"
	}
	return strconv.Itoa(int(p))
}
