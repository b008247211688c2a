package nft

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/nftables"
)

// chainsByFamily lists fixed chains per family; a family in fail fails.
type chainsByFamily struct {
	chains map[nftables.TableFamily][]*nftables.Chain
	fail   map[nftables.TableFamily]error
}

func (c chainsByFamily) ListChainsOfTableFamily(f nftables.TableFamily) ([]*nftables.Chain, error) {
	return c.chains[f], c.fail[f]
}

// TestForwardDropsListsOtherTablesDroppingForwardChains: every filter
// chain of policy drop on the forward hook, of another table, with
// whether the proxy keeps its accept rule there (the chain runs after
// filter-forward); not a chain of policy accept, not another hook or
// type, never our own table's.
func TestForwardDropsListsOtherTablesDroppingForwardChains(t *testing.T) {
	ip, inet := nftables.TableFamilyIPv4, nftables.TableFamilyINet
	filter, nat := nftables.ChainTypeFilter, nftables.ChainTypeNAT
	drop, accept := nftables.ChainPolicyDrop, nftables.ChainPolicyAccept
	input := forwardChain(ip, "filter", "INPUT", filter, 0, drop)
	input.Hooknum = nftables.ChainHookInput
	lister := chainsByFamily{chains: map[nftables.TableFamily][]*nftables.Chain{
		ip: {forwardChain(ip, "filter", "FORWARD", filter, 0, drop), input,
			forwardChain(ip, "nat", "fwd", nat, 0, drop), forwardChain(ip, "open", "forward", filter, 0, accept)},
		inet: {forwardChain(inet, "firewalld", "filter_FORWARD", filter, 10, drop),
			forwardChain(inet, "early", "forward", filter, priorityFilterForward-10, drop),
			forwardChain(inet, TableName, "filter-forward", filter, priorityFilterForward, drop)},
	}, fail: map[nftables.TableFamily]error{nftables.TableFamilyIPv6: errors.New("boom")}}
	got, err := ForwardDrops(lister)
	want := []ForwardDrop{
		{Chain: "inet early forward", Priority: priorityFilterForward - 10, Accepted: false},
		{Chain: "inet firewalld filter_FORWARD", Priority: 10, Accepted: true},
		{Chain: "ip filter FORWARD", Priority: 0, Accepted: true},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ForwardDrops (-want +got):\n%s", d)
	}
	if err == nil || !strings.Contains(err.Error(), "ip6") {
		t.Errorf("error = %v, want one naming the ip6 family", err)
	}
}
