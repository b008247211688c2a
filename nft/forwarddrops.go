package nft

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/google/nftables"
)

// PriorityFilterForward is the priority of our filter-forward chain,
// which marks forwarded service traffic: a forward chain of policy drop
// at a priority above it gets our accept rule.
const PriorityFilterForward = priorityFilterForward

// ForwardDrop is a filter chain of another table on the forward hook
// whose policy is drop: forwarded service traffic (the replies of
// service connections to clients off this node) passes it only if a
// rule accepts it. The preflight reports them.
type ForwardDrop struct {
	// Chain is the chain as nft names it: "ip filter FORWARD" (what
	// iptables-nft's `-P FORWARD DROP` makes), "inet filter forward".
	Chain    string
	Priority int32
	// Accepted says the proxy keeps its accept rule at the chain's head
	// (forward.go): the chain runs after filter-forward, which marks the
	// service traffic. Otherwise the chain runs first, before any mark,
	// and drops that traffic whatever the proxy does.
	Accepted bool
}

// chainLister is the part of Conn (and of *nftables.Conn) that
// ForwardDrops reads through.
type chainLister interface {
	ListChainsOfTableFamily(family nftables.TableFamily) ([]*nftables.Chain, error)
}

// ForwardDrops lists the filter chains of policy drop on the forward
// hook in the ip, ip6 and inet tables other than ours, sorted by chain.
// A family that cannot be listed is an error naming it; the others are
// still listed.
func ForwardDrops(c chainLister) ([]ForwardDrop, error) {
	var out []ForwardDrop
	var errs []error
	for _, fam := range forwardFamilies {
		chains, err := c.ListChainsOfTableFamily(fam)
		if err != nil {
			errs = append(errs, fmt.Errorf("list chains of family %s: %w", familyName(fam), err))
			continue
		}
		for _, ch := range chains {
			if ch.Hooknum == nil || *ch.Hooknum != *nftables.ChainHookForward || ch.Type != nftables.ChainTypeFilter ||
				ch.Policy == nil || *ch.Policy != nftables.ChainPolicyDrop ||
				ch.Table.Family == nftables.TableFamilyINet && ch.Table.Name == TableName {
				continue
			}
			var prio int32
			if ch.Priority != nil {
				prio = int32(*ch.Priority)
			}
			out = append(out, ForwardDrop{Chain: chainText(ch), Priority: prio, Accepted: needsForwardAccept(ch)})
		}
	}
	slices.SortFunc(out, func(a, b ForwardDrop) int { return cmp.Compare(a.Chain, b.Chain) })
	return out, errors.Join(errs...)
}
