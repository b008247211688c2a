//go:build integration

package leftovers

import (
	"slices"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/leftovers"
)

// TestForwardPoliciesReadAsIptablesSetsThem: the preflight's readers see
// the FORWARD policy iptables-legacy sets in x_tables, per family, and
// the ip filter FORWARD chain of policy drop iptables-nft makes, as one
// the proxy keeps its accept rule in.
func TestForwardPoliciesReadAsIptablesSetsThem(t *testing.T) {
	h := leftovers.Host{Proc: "/proc", Sys: "/sys"}
	for _, fam := range []struct {
		name string
		v6   bool
		run  func(t *testing.T, args ...string) string
	}{{"IPv4", false, legacyIPT}, {"IPv6", true, legacyIP6T}} {
		t.Run("iptables-legacy "+fam.name, func(t *testing.T) {
			fam.run(t, "-P", "FORWARD", "DROP") // loads the filter table too
			t.Cleanup(func() { fam.run(t, "-P", "FORWARD", "ACCEPT") })
			if got, err := h.LegacyForwardPolicy(fam.v6); err != nil || got != "DROP" {
				t.Errorf("LegacyForwardPolicy after -P FORWARD DROP = %q, %v; want DROP", got, err)
			}
			fam.run(t, "-P", "FORWARD", "ACCEPT")
			if got, err := h.LegacyForwardPolicy(fam.v6); err != nil || got != "ACCEPT" {
				t.Errorf("LegacyForwardPolicy after -P FORWARD ACCEPT = %q, %v; want ACCEPT", got, err)
			}
		})
	}
	t.Run("iptables-nft", func(t *testing.T) {
		dropIptablesNftTables(t)
		nftIPT(t, "-P", "FORWARD", "DROP")
		got, err := nft.HostForwardDrops()
		want := nft.ForwardDrop{Chain: "ip filter FORWARD", Priority: 0, Accepted: true}
		if err != nil || !slices.Contains(got, want) {
			t.Errorf("HostForwardDrops = %+v, %v; want %+v among them", got, err, want)
		}
		nftIPT(t, "-P", "FORWARD", "ACCEPT")
		if got, err := nft.HostForwardDrops(); err != nil || len(got) != 0 {
			t.Errorf("HostForwardDrops after -P FORWARD ACCEPT = %+v, %v; want none", got, err)
		}
	})
}
