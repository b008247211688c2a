package nft

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Fake is an in-memory Conn that behaves like the kernel's nf_tables for
// the calls the writer makes: messages queue until Flush, which applies
// them all or none; a missing table, chain, set or element is ENOENT, a
// map element whose value differs is EBUSY, an overlapping concatenated
// interval is ENOTEMPTY, a malformed key is EINVAL. Reads see the
// committed state only. Dump prints the state, sorted. It is safe for
// concurrent use.
type Fake struct {
	mu        sync.Mutex
	tables    map[fakeTableKey]*fakeTable
	queue     []fakeOp
	failNext  error
	failRead  error
	lastBatch []string
	flushes   int
}

var _ Conn = (*Fake)(nil)

// NewFake returns an empty fake kernel.
func NewFake() *Fake { return &Fake{tables: map[fakeTableKey]*fakeTable{}} }

type fakeTableKey struct {
	family nftables.TableFamily
	name   string
}

type fakeTable struct {
	chains     map[string]*fakeChain
	sets       map[string]*fakeSet
	anon       int    // anonymous sets created so far, for __setN names
	lastHandle uint64 // the kernel numbers a table's rules from 1
}

type fakeChain struct {
	chain nftables.Chain
	rules []fakeRule
}

// fakeRule is a committed rule: its handle, expressions and user data
// (a comment, for instance).
type fakeRule struct {
	handle   uint64
	exprs    []expr.Any
	userData []byte
}

type fakeSet struct {
	set   nftables.Set
	elems map[string]nftables.SetElement // by elementKey
}

// fakeOp is one queued message: its text (for LastBatch) and its effect
// on a copy of the state, with the batch's anonymous set names by ID.
type fakeOp struct {
	text  string
	apply func(st map[fakeTableKey]*fakeTable, anon map[uint32]string) error
}

func (f *Fake) enqueue(text string, apply func(map[fakeTableKey]*fakeTable, map[uint32]string) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queue = append(f.queue, fakeOp{text: text, apply: apply})
}

func tableText(t *nftables.Table) string { return familyName(t.Family) + " " + t.Name }

func keyOf(t *nftables.Table) fakeTableKey { return fakeTableKey{t.Family, t.Name} }

func lookupTable(st map[fakeTableKey]*fakeTable, t *nftables.Table) (*fakeTable, error) {
	ft := st[keyOf(t)]
	if ft == nil {
		return nil, fmt.Errorf("table %s: %w", tableText(t), unix.ENOENT)
	}
	return ft, nil
}

// lookupChain finds a chain of a table that exists, or ENOENT for either.
func lookupChain(st map[fakeTableKey]*fakeTable, t *nftables.Table, chain string) (*fakeTable, *fakeChain, error) {
	ft, err := lookupTable(st, t)
	if err != nil {
		return nil, nil, err
	}
	fc := ft.chains[chain]
	if fc == nil {
		return nil, nil, fmt.Errorf("chain %s: %w", chain, unix.ENOENT)
	}
	return ft, fc, nil
}

// AddTable queues "add table".
func (f *Fake) AddTable(t *nftables.Table) *nftables.Table {
	f.enqueue("add table "+tableText(t), func(st map[fakeTableKey]*fakeTable, _ map[uint32]string) error {
		if st[keyOf(t)] == nil {
			st[keyOf(t)] = &fakeTable{chains: map[string]*fakeChain{}, sets: map[string]*fakeSet{}}
		}
		return nil
	})
	return t
}

// DelTable queues "delete table".
func (f *Fake) DelTable(t *nftables.Table) {
	f.enqueue("delete table "+tableText(t), func(st map[fakeTableKey]*fakeTable, _ map[uint32]string) error {
		if _, err := lookupTable(st, t); err != nil {
			return err
		}
		delete(st, keyOf(t))
		return nil
	})
}

// FlushTable queues "flush table": every rule of every chain of the
// table is deleted (what `nft flush table` does to rules; the chains and
// sets stay). ENOENT if the table does not exist.
func (f *Fake) FlushTable(t *nftables.Table) {
	f.enqueue("flush table "+tableText(t), func(st map[fakeTableKey]*fakeTable, _ map[uint32]string) error {
		ft, err := lookupTable(st, t)
		if err != nil {
			return err
		}
		for _, c := range ft.chains {
			c.rules = nil
		}
		return nil
	})
}

// AddChain queues "add chain".
func (f *Fake) AddChain(c *nftables.Chain) *nftables.Chain {
	cc := *c
	f.enqueue(fmt.Sprintf("add chain %s %s", tableText(c.Table), c.Name), func(st map[fakeTableKey]*fakeTable, _ map[uint32]string) error {
		ft, err := lookupTable(st, cc.Table)
		if err != nil {
			return err
		}
		if old := ft.chains[cc.Name]; old != nil {
			if (old.chain.Hooknum == nil) != (cc.Hooknum == nil) || old.chain.Type != cc.Type {
				return fmt.Errorf("chain %s: %w", cc.Name, unix.EEXIST)
			}
			return nil
		}
		ft.chains[cc.Name] = &fakeChain{chain: cc}
		return nil
	})
	return c
}

// AddRule queues a rule appended to its chain.
func (f *Fake) AddRule(r *nftables.Rule) *nftables.Rule { return f.queueRule(r, false) }

// queueRule queues a rule appended to its chain, or inserted at its head.
func (f *Fake) queueRule(r *nftables.Rule, atHead bool) *nftables.Rule {
	t, chain := r.Table, r.Chain.Name
	exprs, ud := slices.Clone(r.Exprs), slices.Clone(r.UserData)
	verb := map[bool]string{false: "add", true: "insert"}[atHead]
	f.enqueue(fmt.Sprintf("%s rule %s %s", verb, tableText(t), chain), func(st map[fakeTableKey]*fakeTable, anon map[uint32]string) error {
		ft, fc, err := lookupChain(st, t, chain)
		if err != nil {
			return err
		}
		resolved, err := ft.resolveExprs(exprs, anon)
		if err == nil {
			err = checkHooks(fc.chain.Hooknum, exprs)
		}
		if err != nil {
			return fmt.Errorf("rule in chain %s: %w", chain, err)
		}
		ft.lastHandle++
		fr := fakeRule{handle: ft.lastHandle, exprs: resolved, userData: ud}
		if atHead {
			fc.rules = slices.Insert(fc.rules, 0, fr)
		} else {
			fc.rules = append(fc.rules, fr)
		}
		return nil
	})
	return r
}

// resolveExprs checks what a rule refers to, and names lookups of
// anonymous sets as the kernel does (__set0, __set1, ...).
func (ft *fakeTable) resolveExprs(exprs []expr.Any, anon map[uint32]string) ([]expr.Any, error) {
	out := make([]expr.Any, len(exprs))
	for i, e := range exprs {
		out[i] = e
		switch e := e.(type) {
		case *expr.Lookup:
			l := *e
			if l.SetName == anonSetName {
				l.SetName = anon[l.SetID]
			}
			s := ft.sets[l.SetName]
			if s == nil {
				return nil, fmt.Errorf("lookup set %s: %w", l.SetName, unix.ENOENT)
			}
			if l.IsDestRegSet && (!s.set.IsMap || s.set.DataType.Name != nftables.TypeVerdict.Name) && l.DestRegister == unix.NFT_REG_VERDICT {
				return nil, fmt.Errorf("vmap lookup of %s, not a verdict map: %w", l.SetName, unix.EINVAL)
			}
			out[i] = &l
		case *expr.Verdict:
			if err := ft.checkJump(e); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// checkHooks refuses, as the kernel's nft_fib_validate does, a fib
// lookup of the output interface in a base chain of a hook without an
// input interface (output, postrouting): the route there is the one
// chosen, read with meta oifname. A regular chain is checked by the
// kernel when a base chain jumps to it; our rules never do.
func checkHooks(hook *nftables.ChainHook, exprs []expr.Any) error {
	if hook == nil {
		return nil
	}
	for _, e := range exprs {
		f, ok := e.(*expr.Fib)
		if !ok || !f.ResultOIF && !f.ResultOIFNAME {
			continue
		}
		switch *hook {
		case *nftables.ChainHookPrerouting, *nftables.ChainHookInput, *nftables.ChainHookForward:
		default:
			return fmt.Errorf("fib oif in hook %d: %w", *hook, unix.EOPNOTSUPP)
		}
	}
	return nil
}

// checkJump checks the target of a jump or goto: it must exist and be a
// regular chain.
func (ft *fakeTable) checkJump(v *expr.Verdict) error {
	if v.Kind != expr.VerdictGoto && v.Kind != expr.VerdictJump {
		return nil
	}
	c := ft.chains[v.Chain]
	if c == nil {
		return fmt.Errorf("chain %s: %w", v.Chain, unix.ENOENT)
	}
	if c.chain.Hooknum != nil {
		return fmt.Errorf("jump to base chain %s: %w", v.Chain, unix.EOPNOTSUPP)
	}
	return nil
}

// AddSet queues "add set" and its initial elements.
func (f *Fake) AddSet(s *nftables.Set, vals []nftables.SetElement) error {
	if s.Anonymous && !s.Constant {
		return fmt.Errorf("anonymous structs must be constant")
	}
	ss := *s
	f.enqueue(fmt.Sprintf("add set %s %s", tableText(s.Table), s.Name), func(st map[fakeTableKey]*fakeTable, anon map[uint32]string) error {
		ft, err := lookupTable(st, ss.Table)
		if err != nil {
			return err
		}
		if ss.Anonymous {
			ss.Name = fmt.Sprintf("__set%d", ft.anon)
			ft.anon++
			anon[ss.ID] = ss.Name
		}
		if old := ft.sets[ss.Name]; old != nil {
			if old.set.KeyType.Name != ss.KeyType.Name || old.set.Interval != ss.Interval || old.set.IsMap != ss.IsMap {
				return fmt.Errorf("set %s: %w", ss.Name, unix.EEXIST)
			}
			return nil
		}
		ft.sets[ss.Name] = &fakeSet{set: ss, elems: map[string]nftables.SetElement{}}
		return nil
	})
	if len(vals) > 0 && !s.Anonymous {
		return f.SetAddElements(s, vals)
	}
	if len(vals) > 0 {
		f.enqueueElements("add", &ss, vals, true)
	}
	return nil
}

// SetAddElements queues "add element".
func (f *Fake) SetAddElements(s *nftables.Set, vals []nftables.SetElement) error {
	if s.Anonymous {
		return fmt.Errorf("anonymous sets cannot be updated")
	}
	f.enqueueElements("add", s, vals, false)
	return nil
}

// SetDeleteElements queues "delete element".
func (f *Fake) SetDeleteElements(s *nftables.Set, vals []nftables.SetElement) error {
	if s.Anonymous {
		return fmt.Errorf("anonymous sets cannot be updated")
	}
	f.enqueueElements("delete", s, vals, false)
	return nil
}

// enqueueElements queues one op per element, so LastBatch counts them.
func (f *Fake) enqueueElements(verb string, s *nftables.Set, vals []nftables.SetElement, anonymous bool) {
	t, name, set := s.Table, s.Name, *s
	for _, v := range vals {
		v := v
		text := fmt.Sprintf("%s element %s %s %s", verb, tableText(t), name, formatSetElement(&set, v))
		f.enqueue(text, func(st map[fakeTableKey]*fakeTable, anon map[uint32]string) error {
			ft, err := lookupTable(st, t)
			if err != nil {
				return err
			}
			setName := name
			if anonymous {
				setName = fmt.Sprintf("__set%d", ft.anon-1)
			}
			fs := ft.sets[setName]
			if fs == nil {
				return fmt.Errorf("set %s: %w", setName, unix.ENOENT)
			}
			if verb == "delete" {
				return fs.del(v)
			}
			return ft.addElement(fs, v)
		})
	}
}

// elementKey identifies an element as the kernel does: by key, interval
// end and interval-end flag.
func elementKey(e nftables.SetElement) string {
	return fmt.Sprintf("%x/%x/%t", e.Key, e.KeyEnd, e.IntervalEnd)
}

func (ft *fakeTable) addElement(fs *fakeSet, e nftables.SetElement) error {
	s := &fs.set
	if uint32(len(e.Key)) != s.KeyType.Bytes || (len(e.KeyEnd) > 0 && len(e.KeyEnd) != len(e.Key)) {
		return fmt.Errorf("set %s: key of %d bytes, want %d: %w", s.Name, len(e.Key), s.KeyType.Bytes, unix.EINVAL)
	}
	if s.Interval && s.Concatenation && len(e.KeyEnd) == 0 {
		return fmt.Errorf("set %s: concatenated interval without key end: %w", s.Name, unix.EINVAL)
	}
	verdictMap := s.IsMap && s.DataType.Name == nftables.TypeVerdict.Name
	switch {
	case verdictMap != (e.VerdictData != nil),
		s.IsMap && !verdictMap && uint32(len(e.Val)) != s.DataType.Bytes,
		!s.IsMap && len(e.Val) > 0:
		return fmt.Errorf("set %s: element data does not match the set: %w", s.Name, unix.EINVAL)
	}
	if e.VerdictData != nil {
		if err := ft.checkJump(e.VerdictData); err != nil {
			return err
		}
	}
	k := elementKey(e)
	if old, ok := fs.elems[k]; ok {
		if !sameVerdict(old.VerdictData, e.VerdictData) || string(old.Val) != string(e.Val) {
			return fmt.Errorf("set %s: element exists with another value: %w", s.Name, unix.EBUSY)
		}
		return nil
	}
	if s.Interval && s.Concatenation {
		for _, old := range fs.elems {
			if within(e.Key, old) || within(e.KeyEnd, old) || within(old.Key, e) {
				return fmt.Errorf("set %s: interval overlaps: %w", s.Name, unix.ENOTEMPTY)
			}
		}
	}
	fs.elems[k] = e
	return nil
}

// within reports whether key lies in e's interval [Key, KeyEnd].
func within(key []byte, e nftables.SetElement) bool {
	return bytes.Compare(key, e.Key) >= 0 && bytes.Compare(key, e.KeyEnd) <= 0
}

func sameVerdict(a, b *expr.Verdict) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func (fs *fakeSet) del(e nftables.SetElement) error {
	e.VerdictData = nil
	k := elementKey(e)
	if _, ok := fs.elems[k]; !ok {
		return fmt.Errorf("set %s: element %s: %w", fs.set.Name, formatSetElement(&fs.set, e), unix.ENOENT)
	}
	delete(fs.elems, k)
	return nil
}

// FailNextFlush makes the next Flush fail with err and apply nothing, as
// the kernel does when it rejects a batch.
func (f *Fake) FailNextFlush(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failNext = err
}

// Flush applies the queued messages atomically: on the first error the
// state is left as it was. The queue is emptied either way.
func (f *Fake) Flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	queue := f.queue
	f.queue = nil
	if len(queue) == 0 {
		return nil
	}
	f.flushes++
	f.lastBatch = make([]string, len(queue))
	for i, op := range queue {
		f.lastBatch[i] = op.text
	}
	if err := f.failNext; err != nil {
		f.failNext = nil
		return err
	}
	st := cloneTables(f.tables)
	anon := map[uint32]string{}
	for i, op := range queue {
		if err := op.apply(st, anon); err != nil {
			return fmt.Errorf("message %d (%s): %w", i+1, op.text, err)
		}
	}
	f.tables = st
	return nil
}

// GetSetByName returns a copy of a committed set (queued messages play no
// part): ENOENT if the table or the set does not exist, as the kernel.
func (f *Fake) GetSetByName(t *nftables.Table, name string) (*nftables.Set, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fs, err := f.committedSet(t, name)
	if err != nil {
		return nil, err
	}
	s := fs.set
	s.Table = &nftables.Table{Family: t.Family, Name: t.Name}
	return &s, nil
}

// GetSetElements returns a committed set's elements, sorted by key:
// ENOENT if the table or the set does not exist.
func (f *Fake) GetSetElements(s *nftables.Set) ([]nftables.SetElement, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fs, err := f.committedSet(s.Table, s.Name)
	if err != nil {
		return nil, err
	}
	return sortedElements(fs), nil
}

// EachSetElement calls each with a committed set's elements, sorted by
// key, as GetSetElements returns them: ENOENT if the table or the set
// does not exist, and FailNextRead fails it too. Like the kernel reader's,
// an element's bytes are valid only during its call: the fake copies
// them into one buffer and overwrites it after the call, so that a
// caller that keeps them sees them change. It never reports
// ErrDumpInterrupted unless FailNextRead asks for it.
func (f *Fake) EachSetElement(s *nftables.Set, each func(nftables.SetElement) error) error {
	f.mu.Lock()
	fs, err := f.committedSet(s.Table, s.Name)
	var elems []nftables.SetElement
	if err == nil {
		elems = sortedElements(fs)
	}
	f.mu.Unlock()
	if err != nil {
		return err
	}
	var buf []byte
	for _, e := range elems {
		buf = append(buf[:0], e.Key...)
		buf = append(buf, e.KeyEnd...)
		buf = append(buf, e.Val...)
		k, ke := len(e.Key), len(e.Key)+len(e.KeyEnd)
		e.Key, e.KeyEnd, e.Val = nilIfEmpty(buf[:k:k]), nilIfEmpty(buf[k:ke:ke]), nilIfEmpty(buf[ke:len(buf):len(buf)])
		err := each(e)
		for i := range buf {
			buf[i] = 0xa5
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// nilIfEmpty keeps an absent slice absent.
func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// committedSet finds a set for a read, failing first if FailNextRead
// asked for it.
func (f *Fake) committedSet(t *nftables.Table, name string) (*fakeSet, error) {
	if err := f.takeReadFailure(); err != nil {
		return nil, err
	}
	ft, err := lookupTable(f.tables, t)
	if err != nil {
		return nil, err
	}
	fs := ft.sets[name]
	if fs == nil {
		return nil, fmt.Errorf("set %s: %w", name, unix.ENOENT)
	}
	return fs, nil
}

// FailNextRead makes the next read (GetSets, GetSetByName, GetSetElements,
// EachSetElement, ListChainsOfTableFamily, GetRules) fail with err.
func (f *Fake) FailNextRead(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failRead = err
}

// LastBatch returns the messages of the last flushed batch, one line per
// table, chain, rule or set message and per element.
func (f *Fake) LastBatch() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.lastBatch)
}

// Flushes counts the non-empty batches flushed so far.
func (f *Fake) Flushes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.flushes
}

func cloneTables(in map[fakeTableKey]*fakeTable) map[fakeTableKey]*fakeTable {
	out := make(map[fakeTableKey]*fakeTable, len(in))
	for k, t := range in {
		nt := &fakeTable{chains: make(map[string]*fakeChain, len(t.chains)), sets: make(map[string]*fakeSet, len(t.sets)), anon: t.anon}
		for name, c := range t.chains {
			nt.chains[name] = &fakeChain{chain: c.chain, rules: slices.Clone(c.rules)}
			nt.lastHandle = t.lastHandle
		}
		for name, s := range t.sets {
			nt.sets[name] = &fakeSet{set: s.set, elems: maps.Clone(s.elems)}
		}
		out[k] = nt
	}
	return out
}
