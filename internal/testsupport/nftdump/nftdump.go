package nftdump

import (
	"fmt"

	"github.com/google/nftables"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
)

// DumpTable reads one table back from the kernel (ListTablesOfFamily,
// GetSets, GetSetElements, ListChainsOfTableFamily, and GetRules through
// nft.NewRuleReader) and prints
// it in nft.Fake.Dump's format. It returns "" for a missing table.
func DumpTable(c *nftables.Conn, family nftables.TableFamily, name string) (string, error) {
	tables, err := c.ListTablesOfFamily(family)
	if err != nil {
		return "", fmt.Errorf("list tables: %w", err)
	}
	var table *nftables.Table
	for _, t := range tables {
		if t.Name == name {
			table = t
		}
	}
	if table == nil {
		return "", nil
	}
	sets, err := readSets(c, table)
	if err != nil {
		return "", err
	}
	chains, err := c.ListChainsOfTableFamily(family)
	if err != nil {
		return "", fmt.Errorf("list chains: %w", err)
	}
	// Rules are read as the writer reads them: google/nftables alone
	// cannot decode a ct set, nor a ct direction.
	rr, err := nft.NewRuleReader()
	if err != nil {
		return "", fmt.Errorf("rule reader: %w", err)
	}
	var loaded []nft.LoadedChain
	for _, ch := range chains {
		if ch.Table.Name != name {
			continue
		}
		rules, err := rr.GetRules(table, ch)
		if err != nil {
			return "", fmt.Errorf("rules of chain %s: %w", ch.Name, err)
		}
		loaded = append(loaded, nft.LoadedChain{Chain: ch, Rules: rules})
	}
	f := nft.NewFake()
	f.Load(table, sets, loaded)
	return f.Dump(), nil
}

func readSets(c *nftables.Conn, table *nftables.Table) ([]nft.LoadedSet, error) {
	sets, err := c.GetSets(table)
	if err != nil {
		return nil, fmt.Errorf("list sets: %w", err)
	}
	var loaded []nft.LoadedSet
	for _, s := range sets {
		elems, err := c.GetSetElements(s)
		if err != nil {
			return nil, fmt.Errorf("elements of set %s: %w", s.Name, err)
		}
		loaded = append(loaded, nft.LoadedSet{Set: s, Elements: elems})
	}
	return loaded, nil
}
