package nft

import (
	"fmt"
	"slices"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// InsertRule queues a rule inserted at the head of its chain.
func (f *Fake) InsertRule(r *nftables.Rule) *nftables.Rule { return f.queueRule(r, true) }

// DelRule queues the deletion of the rule with r.Handle from its chain:
// ENOENT at Flush if the table, the chain or the rule does not exist.
// A zero handle is refused at once, as google/nftables does.
func (f *Fake) DelRule(r *nftables.Rule) error {
	if r.Handle == 0 {
		return fmt.Errorf("rule's handle cannot be 0")
	}
	t, chain, h := r.Table, r.Chain.Name, r.Handle
	f.enqueue(fmt.Sprintf("delete rule %s %s handle %d", tableText(t), chain, h), func(st map[fakeTableKey]*fakeTable, _ map[uint32]string) error {
		_, fc, err := lookupChain(st, t, chain)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(fc.rules, func(r fakeRule) bool { return r.handle == h })
		if i < 0 {
			return fmt.Errorf("rule %d of chain %s: %w", h, chain, unix.ENOENT)
		}
		fc.rules = slices.Delete(fc.rules, i, i+1)
		return nil
	})
	return nil
}
