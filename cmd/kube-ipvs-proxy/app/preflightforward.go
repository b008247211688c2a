package app

import (
	"fmt"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/leftovers"
)

// The preflight's FORWARD checks. A node whose FORWARD drops by policy
// drops the replies of service connections to clients off the node
// unless a rule accepts them, as kube-proxy's KUBE-FORWARD did. The
// proxy keeps such a rule at the head of every nftables forward chain of
// policy drop that runs after its filter-forward (nft/forward.go),
// iptables-nft's FORWARD included; it cannot in iptables-legacy's
// x_tables, where the operator adds it (README.md, "Nodes whose iptables
// is iptables-legacy").

// ForwardReader reads the node's FORWARD policies.
type ForwardReader interface {
	// NFTForwardDrops lists the nftables forward chains of policy drop
	// of other tables than ours (nft.ForwardDrops).
	NFTForwardDrops() ([]nft.ForwardDrop, error)
	// LegacyForwardPolicy is iptables-legacy's filter FORWARD policy of
	// a family ("DROP", "ACCEPT"); "" without a legacy filter table.
	LegacyForwardPolicy(v6 bool) (string, error)
}

// HostForward is ForwardReader on the running kernel (CAP_NET_ADMIN).
type HostForward struct{}

func (HostForward) NFTForwardDrops() ([]nft.ForwardDrop, error) { return nft.HostForwardDrops() }

func (HostForward) LegacyForwardPolicy(v6 bool) (string, error) {
	return leftovers.Host{Proc: "/proc", Sys: "/sys"}.LegacyForwardPolicy(v6)
}

// forwardFindings reports each FORWARD that drops by policy and what the
// proxy does about it; mark is the masquerade mark the accept rule
// matches. A chain that drops before the proxy can mark the traffic, and
// iptables-legacy's FORWARD, are warnings: kube-proxy's rules fare no
// better there unless its own legacy KUBE-FORWARD is still in place.
func forwardFindings(r ForwardReader, mark uint32) []finding {
	var out []finding
	add := func(sev severity, msg string) { out = append(out, finding{sev, groupNode, "FORWARD", msg}) }
	drops, err := r.NFTForwardDrops()
	if err != nil {
		add(sevWarning, "cannot read the nftables forward chains (run the preflight as root): "+err.Error())
	}
	for _, d := range drops {
		if d.Accepted {
			add(sevInfo, fmt.Sprintf("%s drops by policy: the proxy keeps a rule at its head accepting forwarded service traffic (mark 0x%x), and --cleanup removes it", d.Chain, mark))
			continue
		}
		add(sevWarning, fmt.Sprintf("%s drops by policy at priority %d, before the proxy's filter-forward marks forwarded service traffic: "+
			"the replies of service connections to clients off this node are dropped there; accept them in that chain or give it a priority above %d",
			d.Chain, d.Priority, nft.PriorityFilterForward))
	}
	legacyDrops := 0
	for _, fam := range []struct {
		v6          bool
		name, iptab string
	}{{false, "ip", "iptables-legacy"}, {true, "ip6", "ip6tables-legacy"}} {
		policy, err := r.LegacyForwardPolicy(fam.v6)
		switch {
		case err != nil:
			add(sevWarning, fmt.Sprintf("cannot read %s's filter table (run the preflight as root): %v", fam.iptab, err))
		case policy == "DROP":
			legacyDrops++
			add(sevWarning, fmt.Sprintf("%s filter FORWARD policy DROP: the proxy cannot keep its accept rule in x_tables, and forwarded service traffic "+
				"passes only while kube-proxy's KUBE-FORWARD is there; before removing it, add "+
				"`%s -I FORWARD -m mark --mark 0x%x/0x%x -m comment --comment \"kube-ipvs-proxy: accept forwarded service traffic\" -j ACCEPT` "+
				"(README.md, Nodes whose iptables is iptables-legacy)", fam.iptab, fam.iptab, mark, mark))
		case policy != "":
			add(sevInfo, fmt.Sprintf("%s filter FORWARD policy %s", fam.iptab, policy))
		}
	}
	if len(drops) == 0 && legacyDrops == 0 && len(out) == 0 {
		add(sevInfo, "no forward chain drops by policy (nftables, iptables-nft, iptables-legacy)")
	}
	return out
}
