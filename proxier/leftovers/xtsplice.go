package leftovers

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// Removing kube-proxy's chains from an iptables-legacy table. x_tables
// is written whole (IPT_SO_SET_REPLACE takes a table's every entry), but
// the blob to write need not be built from rules: it is the blob the
// kernel handed out (IPT_SO_GET_ENTRIES), with whole entries cut out.
// Every match and target of the entries that stay is copied byte for
// byte, whatever extension it is, so nothing here encodes a match or a
// target; what moves are offsets. A standard target's verdict, when it is
// not negative, is the byte offset of the entry it jumps to (or goes to:
// the goto flag lives in the entry's header and is copied), and the
// info's hook_entry and underflow are offsets of entries too: each is
// moved to where its entry lands. Cut are a chain of kube-proxy's, from
// its ERROR head through its closing RETURN, and every rule elsewhere
// whose verdict jumps to one of them. A blob this does not understand is
// refused, whole: nothing is written.

// xtNumHooks is NF_INET_NUMHOOKS: hook_entry and underflow have one
// offset per netfilter hook, meaningful for the table's valid hooks.
const xtNumHooks = 5

// xtHookNames are the built-in chains on each hook, in hook order.
var xtHookNames = [xtNumHooks]string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}

// xtInfo is ipt_getinfo (ip6t_getinfo is the same) past the table's
// name: the hooks the table is on, where each hook's chain starts and
// where its policy entry is (offsets into the entries blob), and the
// number of entries and the blob's size.
type xtInfo struct {
	ValidHooks uint32
	HookEntry  [xtNumHooks]uint32
	Underflow  [xtNumHooks]uint32
	NumEntries uint32
	Size       uint32
}

// parseXtInfo reads ipt_getinfo's fields after the name.
func parseXtInfo(b []byte) (xtInfo, error) {
	if len(b) < xtInfoUnderflowOff+4*xtNumHooks+8 {
		return xtInfo{}, fmt.Errorf("ipt_getinfo of %d bytes: too short", len(b))
	}
	u32 := func(off int) uint32 { return binary.NativeEndian.Uint32(b[off:]) }
	in := xtInfo{ValidHooks: u32(xtInfoValidHooksOff)}
	for h := range xtNumHooks {
		in.HookEntry[h] = u32(xtInfoValidHooksOff + 4 + 4*h)
		in.Underflow[h] = u32(xtInfoUnderflowOff + 4*h)
	}
	in.NumEntries = u32(xtInfoUnderflowOff + 4*xtNumHooks)
	in.Size = u32(xtInfoUnderflowOff + 4*xtNumHooks + 4)
	return in, nil
}

const (
	// xt_entry_match's and xt_entry_target's header: a u16 size, a
	// 29-byte name, a revision.
	xtHeaderSize = 32
	// xt_standard_target: the header and an int verdict, aligned to 8.
	xtStandardSize = 40
	// XT_RETURN, -NF_REPEAT-1: the verdict of a user chain's closing
	// entry.
	xtVerdictReturn = -5
)

// xtParsedEntry is one entry of a blob: where it is, its target, and
// the chain it belongs to.
type xtParsedEntry struct {
	off, size int
	target    string // "" for the standard target
	verdict   int32  // the standard target's
	errName   string // the ERROR target's data: a chain's name, or ERROR at the table's end
	chain     string // a user chain's name, or a built-in chain's hook name
	head      bool   // a user chain's ERROR head
}

// xtEntries splits a blob into its entries, checking each as the kernel
// will (the matches fill the space up to the target exactly, a standard
// target is 40 bytes, everything 8-byte aligned) and placing each in its
// chain: a built-in chain runs from its hook_entry through its underflow,
// a user chain from its ERROR head to the next ERROR entry; the table
// ends with the ERROR entry named "ERROR". Anything else is an error
// naming the offset.
func xtEntries(blob []byte, info xtInfo, l xtEntryLayout) ([]xtParsedEntry, error) {
	if int(info.Size) != len(blob) {
		return nil, fmt.Errorf("info says %d bytes, the entries are %d", info.Size, len(blob))
	}
	starts := map[int]int{} // offset → hook whose chain starts there
	ends := map[int]int{}   // offset → hook whose policy entry is there
	for h := range xtNumHooks {
		if info.ValidHooks&(1<<h) == 0 {
			continue
		}
		if _, dup := starts[int(info.HookEntry[h])]; dup {
			return nil, fmt.Errorf("hooks share the chain at %d", info.HookEntry[h])
		}
		starts[int(info.HookEntry[h])], ends[int(info.Underflow[h])] = h, h
	}
	var out []xtParsedEntry
	chain, ended := "", false
	for off := 0; off < len(blob); {
		e, err := xtParseEntry(blob, off, l)
		if err != nil {
			return nil, err
		}
		if ended {
			return nil, fmt.Errorf("entry at %d: after the table's end", off)
		}
		if h, ok := starts[off]; ok {
			chain = xtHookNames[h]
			delete(starts, off)
		}
		if e.target == xtErrorTarget {
			if e.errName == xtErrorTarget {
				ended, chain = true, ""
			} else {
				chain, e.head = e.errName, true
			}
		}
		if chain == "" && !ended {
			return nil, fmt.Errorf("entry at %d: in no chain", off)
		}
		e.chain = chain
		if h, ok := ends[off]; ok {
			if e.chain != xtHookNames[h] || e.target != xtStandardTarget || e.verdict >= 0 {
				return nil, fmt.Errorf("entry at %d: the policy of %s is not a policy of that chain", off, xtHookNames[h])
			}
			chain = ""
			delete(ends, off)
		}
		out = append(out, e)
		off += e.size
	}
	switch {
	case !ended:
		return nil, fmt.Errorf("no ERROR entry ends the table")
	case len(starts)+len(ends) > 0:
		return nil, fmt.Errorf("a hook's entry or policy is not an entry of its chain")
	case len(out) != int(info.NumEntries):
		return nil, fmt.Errorf("info says %d entries, the blob holds %d", info.NumEntries, len(out))
	}
	return out, nil
}

// xtParseEntry reads the entry at off: its size and target, checked as
// the kernel's xt_check_entry_offsets checks them.
func xtParseEntry(blob []byte, off int, l xtEntryLayout) (xtParsedEntry, error) {
	if off%8 != 0 || off+l.size > len(blob) {
		return xtParsedEntry{}, fmt.Errorf("entry at %d: not an aligned entry header within the %d bytes", off, len(blob))
	}
	tOff := int(binary.NativeEndian.Uint16(blob[off+l.targetOffset:]))
	next := int(binary.NativeEndian.Uint16(blob[off+l.nextOffset:]))
	if tOff < l.size || tOff%8 != 0 || next%8 != 0 || next < tOff+xtHeaderSize || off+next > len(blob) {
		return xtParsedEntry{}, fmt.Errorf("entry at %d: target at %d, next at %d: malformed", off, tOff, next)
	}
	for m := l.size; m < tOff; {
		size := int(binary.NativeEndian.Uint16(blob[off+m:]))
		if size < xtHeaderSize || size%8 != 0 || m+size > tOff {
			return xtParsedEntry{}, fmt.Errorf("entry at %d: match at %d of %d bytes: malformed", off, m, size)
		}
		m += size
	}
	t := blob[off+tOff : off+next]
	if size := int(binary.NativeEndian.Uint16(t)); size != next-tOff {
		return xtParsedEntry{}, fmt.Errorf("entry at %d: target of %d bytes in %d", off, size, next-tOff)
	}
	e := xtParsedEntry{off: off, size: next, target: cString(t[xtTargetNameOff : xtTargetNameOff+xtTargetNameLen])}
	if e.target == xtStandardTarget {
		if next-tOff != xtStandardSize {
			return xtParsedEntry{}, fmt.Errorf("entry at %d: standard target of %d bytes, want %d", off, next-tOff, xtStandardSize)
		}
		e.verdict = int32(binary.NativeEndian.Uint32(t[xtTargetDataOff:]))
	}
	if e.target == xtErrorTarget {
		e.errName = cString(t[xtTargetDataOff:])
	}
	return e, nil
}

// legacyDoomed is which of kube-proxy's chains to cut from a legacy
// table. On a filter table whose FORWARD policy is DROP, KUBE-FORWARD
// stays: it accepts forwarded packets marked for masquerade and those of
// established connections, which is what such a node needs from some
// rule once our table serves (it sets the same mark before the legacy
// filter chain runs), and it matches no ipset.
func legacyDoomed(table, forwardPolicy string) []string {
	if table == "filter" && forwardPolicy == "DROP" {
		return slices.DeleteFunc(slices.Clone(kubeProxyChains[table]), func(c string) bool { return c == "KUBE-FORWARD" })
	}
	return kubeProxyChains[table]
}

// xtSplice is a table with chains cut out: the blob and info to write,
// Kept the old index of each new entry (to carry counters over), and
// what was cut: Chains, and Rules as "CHAIN -> TARGET".
type xtSplice struct {
	Blob   []byte
	Info   xtInfo
	Kept   []int
	Chains []string
	Rules  []string
}

// spliceXtTable cuts the user chains named doomed out of a table, with
// every rule of another chain that jumps or goes to one of them, and
// moves every offset that points past a cut. No chain of doomed in the
// table: an empty xtSplice, nothing to write. Refused, with an error
// naming the offset: a blob xtEntries refuses, a verdict that is not an
// entry's offset, a jump into one of the chains other than to its first
// entry (iptables never writes one), and a rule whose target bears a
// doomed chain's name without being a jump (a chain referenced in a way
// this does not know).
func spliceXtTable(blob []byte, info xtInfo, l xtEntryLayout, doomed []string) (xtSplice, error) {
	entries, err := xtEntries(blob, info, l)
	if err != nil {
		return xtSplice{}, err
	}
	byOff := make(map[int]int, len(entries))
	firstRule := map[int]string{} // offset of a doomed chain's first entry → its name
	var sp xtSplice
	for i, e := range entries {
		byOff[e.off] = i
		if e.head && slices.Contains(doomed, e.chain) {
			firstRule[e.off+e.size] = e.chain
			sp.Chains = append(sp.Chains, e.chain)
		}
	}
	if len(sp.Chains) == 0 {
		return xtSplice{}, nil
	}
	cut := make([]bool, len(entries))
	for i, e := range entries {
		if slices.Contains(doomed, e.chain) {
			cut[i] = true
			continue
		}
		if e.target != xtStandardTarget && slices.Contains(doomed, e.target) {
			return xtSplice{}, fmt.Errorf("entry at %d in %s: target %q is not a jump", e.off, e.chain, e.target)
		}
		if e.target != xtStandardTarget || e.verdict < 0 {
			continue
		}
		to, ok := byOff[int(e.verdict)]
		if !ok {
			return xtSplice{}, fmt.Errorf("entry at %d in %s: verdict %d is not an entry's offset", e.off, e.chain, e.verdict)
		}
		if !slices.Contains(doomed, entries[to].chain) {
			continue
		}
		name, ok := firstRule[int(e.verdict)]
		if !ok {
			return xtSplice{}, fmt.Errorf("entry at %d in %s: jumps into the middle of %s", e.off, e.chain, entries[to].chain)
		}
		cut[i] = true
		sp.Rules = append(sp.Rules, e.chain+" -> "+name)
	}
	return xtRebuild(blob, info, l, entries, cut, sp), nil
}

// xtRebuild copies the entries not cut into a new blob and moves the
// offsets: a verdict, hook_entry or underflow pointing at an entry points
// at its new place, or, where that entry was cut, at the first entry
// after it that stays (a cut rule's successor in its chain: a chain's
// closing entry is never cut alone).
func xtRebuild(blob []byte, info xtInfo, l xtEntryLayout, entries []xtParsedEntry, cut []bool, sp xtSplice) xtSplice {
	newOff := make(map[int]int, len(entries)) // old offset → new offset of it or its first kept successor
	size := 0
	for i := len(entries) - 1; i >= 0; i-- {
		if !cut[i] {
			size += entries[i].size
		}
	}
	next := size
	for i := len(entries) - 1; i >= 0; i-- {
		if !cut[i] {
			next -= entries[i].size
		}
		newOff[entries[i].off] = next
	}
	sp.Blob = make([]byte, 0, size)
	for i, e := range entries {
		if cut[i] {
			continue
		}
		at := len(sp.Blob)
		sp.Blob = append(sp.Blob, blob[e.off:e.off+e.size]...)
		sp.Kept = append(sp.Kept, i)
		if e.target == xtStandardTarget && e.verdict >= 0 {
			tOff := int(binary.NativeEndian.Uint16(blob[e.off+l.targetOffset:]))
			binary.NativeEndian.PutUint32(sp.Blob[at+tOff+xtTargetDataOff:], uint32(newOff[int(e.verdict)]))
		}
	}
	sp.Info = info
	for h := range xtNumHooks {
		if info.ValidHooks&(1<<h) == 0 {
			continue
		}
		sp.Info.HookEntry[h] = uint32(newOff[int(info.HookEntry[h])])
		sp.Info.Underflow[h] = uint32(newOff[int(info.Underflow[h])])
	}
	sp.Info.NumEntries, sp.Info.Size = uint32(len(sp.Kept)), uint32(len(sp.Blob))
	return sp
}
