package packettrace

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Tables reads committed nftables state: *nft.Fake implements it, and so
// does *nftables.Conn.
type Tables interface {
	GetSets(t *nftables.Table) ([]*nftables.Set, error)
	GetSetElements(s *nftables.Set) ([]nftables.SetElement, error)
	ListChainsOfTableFamily(family nftables.TableFamily) ([]*nftables.Chain, error)
	GetRules(t *nftables.Table, c *nftables.Chain) ([]*nftables.Rule, error)
}

// table is a snapshot of one inet table: its chains with their rules and
// its sets with their elements.
type table struct {
	chains map[string]*chain
	order  []*chain // as listed: by name
	sets   map[string]*set
}

// chain is one chain; hook is nil for a regular chain.
type chain struct {
	name     string
	hook     *nftables.ChainHook
	priority int32
	nat      bool
	drop     bool // policy drop (accept otherwise)
	rules    []rule
}

// rule is one rule and its family-relative number (RuleRef.Number).
type rule struct {
	ref   RuleRef
	nfpro int // the meta nfproto it tests, -1 for none
	exprs []expr.Any
}

// set is one set or map with its elements.
type set struct {
	s      *nftables.Set
	elems  []nftables.SetElement
	fields []int // byte length of each key field (padded), for concatenations
}

// readTable snapshots the inet table name.
func readTable(r Tables, name string) (*table, error) {
	tab := &nftables.Table{Family: nftables.TableFamilyINet, Name: name}
	t := &table{chains: map[string]*chain{}, sets: map[string]*set{}}
	sets, err := r.GetSets(tab)
	if err != nil {
		return nil, fmt.Errorf("read sets of inet %s: %w", name, err)
	}
	for _, s := range sets {
		elems, err := r.GetSetElements(s)
		if err != nil {
			return nil, fmt.Errorf("read elements of set %s: %w", s.Name, err)
		}
		fields := fieldLens(s)
		if sum(fields) != int(s.KeyType.Bytes) {
			return nil, fmt.Errorf("set %s: key type %q does not split into fields of %d bytes: %w", s.Name, s.KeyType.Name, s.KeyType.Bytes, ErrUnsupported)
		}
		t.sets[s.Name] = &set{s: s, elems: elems, fields: fields}
	}
	chains, err := r.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, fmt.Errorf("list chains of inet %s: %w", name, err)
	}
	for _, c := range chains {
		if c.Table == nil || c.Table.Name != name {
			continue
		}
		rules, err := r.GetRules(tab, c)
		if err != nil {
			return nil, fmt.Errorf("read rules of chain %s: %w", c.Name, err)
		}
		ch := &chain{name: c.Name, hook: c.Hooknum, nat: c.Type == nftables.ChainTypeNAT}
		if c.Priority != nil {
			ch.priority = int32(*c.Priority)
		}
		if c.Policy != nil && *c.Policy == nftables.ChainPolicyDrop {
			ch.drop = true
		}
		for i, r := range rules {
			ch.rules = append(ch.rules, rule{ref: RuleRef{Chain: c.Name, Index: i}, nfpro: nfprotoOf(r.Exprs), exprs: r.Exprs})
		}
		numberRules(ch.rules)
		t.chains[c.Name] = ch
		t.order = append(t.order, ch)
	}
	return t, nil
}

// nfprotoOf returns the family a rule tests with "meta nfproto == x" (the
// dependency nft puts before an address match in an inet table), or -1.
func nfprotoOf(exprs []expr.Any) int {
	for i := 0; i+1 < len(exprs); i++ {
		m, ok := exprs[i].(*expr.Meta)
		c, ok2 := exprs[i+1].(*expr.Cmp)
		if ok && ok2 && !m.SourceRegister && m.Key == expr.MetaKeyNFPROTO &&
			c.Register == m.Register && c.Op == expr.CmpOpEq && len(c.Data) == 1 {
			return int(c.Data[0])
		}
	}
	return -1
}

// numberRules numbers each rule among the rules of its chain that apply
// to its family; a rule without a family applies to both, and is
// numbered as IPv4's (the same in both when it precedes every family
// rule, as in nat-postrouting and reject-packet).
func numberRules(rules []rule) {
	for i := range rules {
		fam := rules[i].nfpro
		if fam == -1 {
			fam = unix.NFPROTO_IPV4
		}
		n := 1
		for _, r := range rules[:i] {
			if r.nfpro == -1 || r.nfpro == fam {
				n++
			}
		}
		rules[i].ref.Number = n
	}
}

// fieldLens returns the padded byte length of each field of a
// concatenated key, or the whole key's length.
func fieldLens(s *nftables.Set) []int {
	if !s.Concatenation {
		return []int{int(s.KeyType.Bytes)}
	}
	var out []int
	for _, t := range nftables.ConcatSetTypeElements(s.KeyType) {
		out = append(out, int(t.Bytes+3)/4*4)
	}
	return out
}

func sum(ns []int) int {
	t := 0
	for _, n := range ns {
		t += n
	}
	return t
}

// lookup finds the element matching key, as the kernel's set backends
// do: a hash for plain sets and maps, an rbtree of interval starts and
// ends for an interval set, and per-field ranges [Key, KeyEnd] for a
// concatenated interval set (pipapo).
func (s *set) lookup(key []byte) (*nftables.SetElement, bool) {
	switch {
	case s.s.Interval && s.s.Concatenation:
		for i := range s.elems {
			if s.inRanges(key, &s.elems[i]) {
				return &s.elems[i], true
			}
		}
	case s.s.Interval:
		// The element with the greatest start not above key decides: a
		// start matches, an interval end (one past a range) does not.
		var best *nftables.SetElement
		for i := range s.elems {
			e := &s.elems[i]
			if bytes.Compare(e.Key, key) <= 0 && (best == nil || bytes.Compare(e.Key, best.Key) > 0) {
				best = e
			}
		}
		if best != nil && !best.IntervalEnd {
			return best, true
		}
	default:
		for i := range s.elems {
			if bytes.Equal(s.elems[i].Key, key) {
				return &s.elems[i], true
			}
		}
	}
	return nil, false
}

// inRanges matches every field of key against the element's range.
func (s *set) inRanges(key []byte, e *nftables.SetElement) bool {
	if len(e.KeyEnd) != len(key) || len(e.Key) != len(key) {
		return false
	}
	off := 0
	for _, n := range s.fields {
		if off+n > len(key) {
			return false
		}
		k := key[off : off+n]
		if bytes.Compare(k, e.Key[off:off+n]) < 0 || bytes.Compare(k, e.KeyEnd[off:off+n]) > 0 {
			return false
		}
		off += n
	}
	return off == len(key)
}

// hookChains returns the base chains on hook, by priority.
func (t *table) hookChains(hook nftables.ChainHook) []*chain {
	var out []*chain
	for _, c := range t.order {
		if c.hook != nil && *c.hook == hook {
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, func(a, b *chain) int { return int(a.priority) - int(b.priority) })
	return out
}

// allRules lists every rule of every chain, base and regular.
func (t *table) allRules() []RuleRef {
	var out []RuleRef
	for _, c := range t.order {
		for _, r := range c.rules {
			out = append(out, r.ref)
		}
	}
	return out
}
