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
//
// An element that matches the mirror costs no allocation: it is looked
// up by its key bytes, read in place (EachSetElement). Only drift is
// copied out. When some of m's elements are missing, the set is read a
// second time to find which.
func (w *Writer) setDrift(m *mirror, id setID, s *nftables.Set) (diff, int, error) {
	if id.def().base == setClusterCIDRs {
		return w.clusterCIDRsDrift(id, s)
	}
	r := driftRead{m: m, id: id}
	if err := eachElement(w.conn, s, r.start, r.element); err != nil {
		return diff{}, 0, fmt.Errorf("read elements of set %s: %w", id.name(), err)
	}
	if r.err != nil {
		return diff{}, r.read, r.err
	}
	d := r.d
	if r.matched != m.perSet[id] { // some of m's elements are missing
		var have map[elemID]bool
		var scratch []byte
		err := eachElement(w.conn, s, func() { have = make(map[elemID]bool, r.read) }, func(e nftables.SetElement) error {
			if key, ok := kernelKey(id, &e, &scratch); ok {
				have[elemID{set: id, key: string(key)}] = true
			}
			return nil
		})
		if err != nil {
			return diff{}, r.read, fmt.Errorf("read elements of set %s again: %w", id.name(), err)
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
	return d, r.read, nil
}

// driftRead is setDrift's pass over one set's elements.
type driftRead struct {
	m       *mirror
	id      setID
	d       diff
	read    int
	matched int
	err     error  // the first element that is not one we write
	scratch []byte // an interval element's key and end, reused
}

// start begins a read (again, after an interrupted one).
func (r *driftRead) start() { r.d, r.read, r.matched, r.err = diff{}, 0, 0, nil }

// element compares one element with the mirror; it copies the element
// only when it is drift. Elements after one that is not ours are only
// counted.
func (r *driftRead) element(e nftables.SetElement) error {
	r.read++
	if r.err != nil {
		return nil
	}
	key, ok := kernelKey(r.id, &e, &r.scratch)
	if !ok {
		_, _, r.err = kernelElement(r.id, e)
		return nil
	}
	switch st := r.m.installedKey(r.id, key); {
	case !st.present:
		r.d.del = append(r.d.del, element{id: elemID{set: r.id, key: string(key)}, v: kernelValue(r.id, &e)})
	case !sameValue(r.id, &e, st.v):
		eid := elemID{set: r.id, key: string(key)}
		r.d.del = append(r.d.del, element{id: eid, v: kernelValue(r.id, &e)})
		r.d.add = append(r.d.add, element{id: eid, v: st.v})
		r.matched++
	default:
		r.matched++
	}
	return nil
}

// readAttempts bounds the reads of a set whose dump the kernel marks
// interrupted, each a sign that another process is editing it.
const readAttempts = 3

// eachElement reads set s (Conn.EachSetElement), from the start again,
// after start resets the caller's state, while the kernel marks the dump
// interrupted, at most readAttempts times.
func eachElement(c Conn, s *nftables.Set, start func(), each func(nftables.SetElement) error) error {
	var err error
	for range readAttempts {
		start()
		if err = c.EachSetElement(s, each); !errors.Is(err, ErrDumpInterrupted) {
			return err
		}
	}
	return err
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

// clusterCIDRsDrift checks a cluster-cidrs set against
// Config.ClusterCIDRs: a set with other elements is not ours. It returns
// no drift, and the number of elements read.
func (w *Writer) clusterCIDRsDrift(id setID, s *nftables.Set) (diff, int, error) {
	want := map[string]bool{}
	for _, e := range cidrElements(w.cfg.ClusterCIDRs, id.family()) {
		want[elementKey(e)] = true
	}
	n, bad, foreign := 0, "", false
	err := eachElement(w.conn, s, func() { n, bad, foreign = 0, "", false }, func(e nftables.SetElement) error {
		n++
		if !foreign && !want[elementKey(e)] {
			bad, foreign = fmt.Sprintf("%x", e.Key), true
		}
		return nil
	})
	switch {
	case err != nil:
		return diff{}, 0, fmt.Errorf("read elements of set %s: %w", id.name(), err)
	case n != len(want):
		return diff{}, n, fmt.Errorf("set %s has %d elements, want %d: %w", id.name(), n, len(want), errNotOurs)
	case foreign:
		return diff{}, n, fmt.Errorf("set %s: element %s is not a cluster CIDR bound: %w", id.name(), bad, errNotOurs)
	}
	return diff{}, n, nil
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
	var scratch []byte
	key, ok := kernelKey(id, &e, &scratch)
	if !ok {
		return elemID{}, value{}, fmt.Errorf("set %s: element %x-%x is not one we write: %w", id.name(), e.Key, e.KeyEnd, errNotOurs)
	}
	return elemID{set: id, key: string(key)}, kernelValue(id, &e), nil
}

// kernelKey returns the bytes of the mirror's key of an element read
// from set id: its key, and in an interval set its inclusive end right
// after it, put together in *scratch, which is reused. ok is false for an
// element we never write: a key of another length, an interval end, or
// an end where the set has none or none where it has.
func kernelKey(id setID, e *nftables.SetElement, scratch *[]byte) (key []byte, ok bool) {
	n := id.keyLen()
	if len(e.Key) != n || e.IntervalEnd {
		return nil, false
	}
	if !id.def().interval {
		return e.Key, len(e.KeyEnd) == 0
	}
	if len(e.KeyEnd) != n { // a concatenated interval: the inclusive end follows the key
		return nil, false
	}
	*scratch = append(append((*scratch)[:0], e.Key...), e.KeyEnd...)
	return *scratch, true
}

// kernelValue is the value of an element read from set id.
func kernelValue(id setID, e *nftables.SetElement) value {
	switch def := id.def(); {
	case def.verdictMap:
		return value{verdict: elementVerdict(e)}
	case def.data != nil:
		return value{data: string(e.Val)}
	}
	return value{}
}

// sameValue reports whether an element read from set id has value v,
// without allocating.
func sameValue(id setID, e *nftables.SetElement, v value) bool {
	switch def := id.def(); {
	case def.verdictMap:
		return v == value{verdict: elementVerdict(e)}
	case def.data != nil:
		return v.verdict == noVerdict && v.data == string(e.Val)
	}
	return v == value{}
}

// elementVerdict is a verdict map element's verdict: the Fake gives it
// decoded, the kernel readers raw in Val.
func elementVerdict(e *nftables.SetElement) verdict {
	if e.VerdictData != nil {
		return verdictOf(e.VerdictData)
	}
	return rawVerdict(e.Val)
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
// v0.3.0 returns as the raw NFTA_VERDICT_* attributes in Val, into an
// expr.Verdict (Fake.Load). rawVerdict reads the same without
// allocating.
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
