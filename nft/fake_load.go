package nft

import (
	"github.com/google/nftables"
)

// LoadedSet is a set or map as a kernel lists it, with its elements.
type LoadedSet struct {
	Set      *nftables.Set
	Elements []nftables.SetElement
}

// LoadedChain is a chain as a kernel lists it, with its rules.
type LoadedChain struct {
	Chain *nftables.Chain
	Rules []*nftables.Rule
}

// Load puts one table into the fake as committed state, as a kernel
// lists it (ListTablesOfFamily, GetSets, GetSetElements,
// ListChainsOfTableFamily, GetRules), replacing any table of its family
// and name, so that a kernel's table prints in Dump's format and can be
// compared with a fake's. It makes none of a batch's checks. Two things
// google/nftables v0.3.0 loses reading a kernel are given back: the key
// type of our table's verdict maps, from the schema, and the verdict of
// their elements, which it leaves raw in Val.
func (f *Fake) Load(table *nftables.Table, sets []LoadedSet, chains []LoadedChain) {
	ft := &fakeTable{chains: map[string]*fakeChain{}, sets: map[string]*fakeSet{}}
	for _, ls := range sets {
		s := *ls.Set
		fixMapTypes(table, &s)
		fs := &fakeSet{set: s, elems: map[string]nftables.SetElement{}}
		for _, e := range ls.Elements {
			if s.IsMap && s.DataType.Name == nftables.TypeVerdict.Name && e.VerdictData == nil {
				e.VerdictData, e.Val = decodeVerdict(e.Val), nil
			}
			fs.elems[elementKey(e)] = e
		}
		ft.sets[s.Name] = fs
	}
	for _, lc := range chains {
		fc := &fakeChain{chain: *lc.Chain}
		for _, r := range lc.Rules {
			fc.rules = append(fc.rules, fakeRule{handle: r.Handle, exprs: r.Exprs, userData: r.UserData})
			ft.lastHandle = max(ft.lastHandle, r.Handle)
		}
		ft.chains[lc.Chain.Name] = fc
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tables[keyOf(table)] = ft
}

// fixMapTypes works around google/nftables v0.3.0 reading a verdict map:
// it stores the verdict data type into KeyType, losing the key type. Our
// maps get theirs back from their definitions.
func fixMapTypes(table *nftables.Table, s *nftables.Set) {
	if !s.IsMap || s.KeyType.Name != nftables.TypeVerdict.Name {
		return
	}
	s.DataType = nftables.TypeVerdict
	if table.Name != TableName || table.Family != nftables.TableFamilyINet {
		return
	}
	for i := range numSets() {
		if id := setID(i); id.name() == s.Name {
			s.KeyType = newSets(table)[i].KeyType
		}
	}
}
