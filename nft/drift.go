package nft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// errNotOurs marks a table that is not the one we write: rebuild it.
var errNotOurs = errors.New("not the table we write")

// readStructure checks that every set and chain we write exists as we
// write it (flags, key length, hook, priority), that no other chain does,
// and that each chain has its number of rules. It returns the kernel's
// sets indexed by setID, for reading their elements. Rules are counted,
// not compared: a rule edited in place by hand is not seen. A table that
// is missing or not ours is an error wrapping errNotOurs.
func (w *Writer) readStructure() ([]*nftables.Set, error) {
	c, t := w.conn, w.table
	sets, err := c.GetSets(t)
	if err != nil {
		// google/nftables v0.3.0 does not wrap GetSets' errno: ask again
		// by name, which does, to tell a missing table.
		if _, err2 := c.GetSetByName(t, probeSet); errors.Is(err2, syscall.ENOENT) {
			return nil, fmt.Errorf("table missing: %w", errNotOurs)
		}
		return nil, fmt.Errorf("read sets: %w", err)
	}
	byName := make(map[string]*nftables.Set, len(sets))
	for _, s := range sets {
		if !s.Anonymous {
			byName[s.Name] = s
		}
	}
	if len(byName) != numSets() {
		return nil, fmt.Errorf("%d sets, want %d: %w", len(byName), numSets(), errNotOurs)
	}
	out := make([]*nftables.Set, numSets())
	for i, ws := range newSets(t) {
		s := byName[ws.Name]
		if err := sameSet(s, ws); err != nil {
			return nil, err
		}
		out[i] = s
	}
	if err := w.checkChains(); err != nil {
		return nil, err
	}
	return out, nil
}

// setDrift reads one set's elements and returns the changes that make it
// hold m's elements of that set: kernel elements m does not hold are
// deleted, m's elements the kernel lacks are added, and a map element
// with another value is deleted and added. The cluster CIDRs are not in
// the mirror: they must be exactly Config.ClusterCIDRs, or the table is
// not ours. So is a set with an element of a malformed key.
func (w *Writer) setDrift(m *mirror, id setID, s *nftables.Set) (d diff, read int, err error) {
	elems, err := w.conn.GetSetElements(s)
	if err != nil {
		return diff{}, 0, fmt.Errorf("read elements of set %s: %w", id.name(), err)
	}
	if id.def().base == setClusterCIDRs {
		return diff{}, len(elems), w.sameClusterCIDRs(id, elems)
	}
	matched := 0
	for _, e := range elems {
		eid, v, err := kernelElement(id, e)
		if err != nil {
			return diff{}, len(elems), err
		}
		switch st := m.installed(eid); {
		case !st.present:
			d.del = append(d.del, element{id: eid, v: v})
		case st.v != v:
			d.del = append(d.del, element{id: eid, v: v})
			d.add = append(d.add, element{id: eid, v: st.v})
			matched++
		default:
			matched++
		}
	}
	if matched != m.perSet[id] { // some of m's elements are missing
		have := make(map[elemID]bool, len(elems))
		for _, e := range elems {
			eid, _, _ := kernelElement(id, e)
			have[eid] = true
		}
		m.each(func(e element) {
			if e.id.set == id && !have[e.id] {
				d.add = append(d.add, e)
			}
		})
	}
	sortElements := func(es []element) {
		slices.SortFunc(es, func(a, b element) int { return compareIDs(a.id, b.id) })
	}
	sortElements(d.add)
	sortElements(d.del)
	return d, len(elems), nil
}

// sameSet checks a kernel set against the one we write. The key length is
// not checked for verdict maps: google/nftables v0.3.0 reads their data
// type into KeyType.
func sameSet(s, want *nftables.Set) error {
	switch {
	case s == nil:
		return fmt.Errorf("set %s missing: %w", want.Name, errNotOurs)
	case s.Interval != want.Interval || s.IsMap != want.IsMap || s.Concatenation != want.Concatenation,
		!(want.IsMap && want.DataType.Name == nftables.TypeVerdict.Name) && s.KeyType.Bytes != want.KeyType.Bytes:
		return fmt.Errorf("set %s has other flags or key length: %w", want.Name, errNotOurs)
	}
	return nil
}

// sameClusterCIDRs checks a cluster-cidrs set against
// Config.ClusterCIDRs.
func (w *Writer) sameClusterCIDRs(id setID, got []nftables.SetElement) error {
	want := map[string]bool{}
	for _, e := range cidrElements(w.cfg.ClusterCIDRs, id.family()) {
		want[elementKey(e)] = true
	}
	if len(got) != len(want) {
		return fmt.Errorf("set %s has %d elements, want %d: %w", id.name(), len(got), len(want), errNotOurs)
	}
	for _, e := range got {
		if !want[elementKey(e)] {
			return fmt.Errorf("set %s: element %x is not a cluster CIDR bound: %w", id.name(), e.Key, errNotOurs)
		}
	}
	return nil
}

// checkChains checks the table's chains and their rule counts.
func (w *Writer) checkChains() error {
	chains, err := w.conn.ListChainsOfTableFamily(w.table.Family)
	if err != nil {
		return fmt.Errorf("list chains: %w", err)
	}
	defs := map[string]chainDef{}
	for _, d := range chainDefs {
		defs[d.name] = d
	}
	counts := w.rules
	seen := 0
	for _, ch := range chains {
		if ch.Table == nil || ch.Table.Name != TableName {
			continue
		}
		d, ok := defs[ch.Name]
		if !ok || !sameHook(ch, d) {
			return fmt.Errorf("chain %s is not one we write: %w", ch.Name, errNotOurs)
		}
		seen++
		rules, err := w.conn.GetRules(w.table, ch)
		if err != nil {
			return fmt.Errorf("read rules of chain %s: %w", ch.Name, err)
		}
		if len(rules) != counts[ch.Name] {
			return fmt.Errorf("chain %s has %d rules, want %d: %w", ch.Name, len(rules), counts[ch.Name], errNotOurs)
		}
	}
	if seen != len(chainDefs) {
		return fmt.Errorf("%d chains, want %d: %w", seen, len(chainDefs), errNotOurs)
	}
	return nil
}

func sameHook(c *nftables.Chain, d chainDef) bool {
	if d.hook == nil || c.Hooknum == nil {
		return d.hook == nil && c.Hooknum == nil
	}
	return *c.Hooknum == *d.hook && c.Priority != nil && *c.Priority == d.priority && c.Type == d.typ
}

// kernelElement converts an element read from set id into the mirror's
// form.
func kernelElement(id setID, e nftables.SetElement) (elemID, value, error) {
	def, n := id.def(), id.keyLen()
	key := string(e.Key)
	ok := len(e.Key) == n && !e.IntervalEnd
	if def.interval { // a concatenated interval: the inclusive end follows the key
		ok = ok && len(e.KeyEnd) == n
		key += string(e.KeyEnd)
	} else {
		ok = ok && len(e.KeyEnd) == 0
	}
	if !ok {
		return elemID{}, value{}, fmt.Errorf("set %s: element %x-%x is not one we write: %w", id.name(), e.Key, e.KeyEnd, errNotOurs)
	}
	var v value
	switch {
	case def.verdictMap:
		vd := e.VerdictData
		if vd == nil {
			vd = decodeVerdict(e.Val) // google/nftables v0.3.0 leaves it raw
		}
		v.verdict = verdictOf(vd)
	case def.data != nil:
		v.data = string(e.Val)
	}
	return elemID{set: id, key: key}, v, nil
}

// unknownVerdict is a verdict we never write: the element is replaced.
const unknownVerdict verdict = 255

func verdictOf(v *expr.Verdict) verdict {
	switch {
	case v == nil:
		return unknownVerdict
	case v.Kind == expr.VerdictGoto && v.Chain == chainRejectPacket:
		return rejectGoto
	case v.Kind == expr.VerdictDrop:
		return dropVerdict
	}
	return unknownVerdict
}

// decodeVerdict parses a verdict map element's data, which google/nftables
// v0.3.0 returns as the raw NFTA_VERDICT_* attributes in Val.
func decodeVerdict(b []byte) *expr.Verdict {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return nil
	}
	ad.ByteOrder = binary.BigEndian
	v := &expr.Verdict{}
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_VERDICT_CODE:
			v.Kind = expr.VerdictKind(int32(ad.Uint32()))
		case unix.NFTA_VERDICT_CHAIN:
			v.Chain = ad.String()
		}
	}
	if ad.Err() != nil {
		return nil
	}
	return v
}
