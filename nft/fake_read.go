package nft

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// GetSets returns copies of a table's committed sets, anonymous ones
// included, sorted by name: ENOENT if the table does not exist.
func (f *Fake) GetSets(t *nftables.Table) ([]*nftables.Set, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, err := f.readTable(t)
	if err != nil {
		return nil, err
	}
	out := make([]*nftables.Set, 0, len(ft.sets))
	for _, name := range sortedNames(ft.sets) {
		s := ft.sets[name].set
		s.Table = &nftables.Table{Family: t.Family, Name: t.Name}
		out = append(out, &s)
	}
	return out, nil
}

// ListChainsOfTableFamily returns copies of the committed chains of every
// table of family, sorted by table and chain name.
func (f *Fake) ListChainsOfTableFamily(family nftables.TableFamily) ([]*nftables.Chain, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.takeReadFailure(); err != nil {
		return nil, err
	}
	var out []*nftables.Chain
	for k, ft := range f.tables {
		if k.family != family {
			continue
		}
		for _, name := range sortedNames(ft.chains) {
			c := ft.chains[name].chain
			c.Table = &nftables.Table{Family: k.family, Name: k.name}
			out = append(out, &c)
		}
	}
	slices.SortFunc(out, func(a, b *nftables.Chain) int {
		if c := strings.Compare(a.Table.Name, b.Table.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// GetRules returns a committed chain's rules: ENOENT if the table or the
// chain does not exist.
func (f *Fake) GetRules(t *nftables.Table, c *nftables.Chain) ([]*nftables.Rule, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, err := f.readTable(t)
	if err != nil {
		return nil, err
	}
	fc := ft.chains[c.Name]
	if fc == nil {
		return nil, fmt.Errorf("chain %s: %w", c.Name, unix.ENOENT)
	}
	out := make([]*nftables.Rule, len(fc.rules))
	for i, r := range fc.rules {
		out[i] = &nftables.Rule{Table: t, Chain: c, Handle: r.handle, Exprs: slices.Clone(r.exprs), UserData: slices.Clone(r.userData)}
	}
	return out, nil
}

// takeReadFailure returns, once, the error FailNextRead asked for.
func (f *Fake) takeReadFailure() error {
	err := f.failRead
	f.failRead = nil
	return err
}

// readTable is a read's lookup of a committed table: the injected read
// failure first, as the kernel's socket would fail, then ENOENT if the
// table does not exist. The caller holds f.mu.
func (f *Fake) readTable(t *nftables.Table) (*fakeTable, error) {
	if err := f.takeReadFailure(); err != nil {
		return nil, err
	}
	return lookupTable(f.tables, t)
}
