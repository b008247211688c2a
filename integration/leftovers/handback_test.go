//go:build integration

package leftovers

import (
	"maps"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/leftovers"
)

func legacyIP6T(t *testing.T, args ...string) string {
	return xtables(t, "xtables-legacy-multi", "ip6tables-legacy", args...)
}

// servesOnHost fails t unless KubeProxyServesOnHost finds form ("" for
// none).
func servesOnHost(t *testing.T, form, when string) {
	t.Helper()
	if got, err := leftovers.KubeProxyServesOnHost(); err != nil || got != form {
		t.Errorf("KubeProxyServesOnHost = %q, %v %s; want %q", got, err, when, form)
	}
}

// TestKubeProxyServesOnHostSeesItsIptablesLegacyRules: kube-proxy's rules
// as iptables-legacy writes them (x_tables, read here with getsockopt as
// iptables-legacy-save reads them, nothing run) are recognised once its
// KUBE-SERVICES and KUBE-POSTROUTING hold rules, not while they are
// created and linked empty, in either family; the chains' rule counts
// are those iptables-legacy lists.
func TestKubeProxyServesOnHostSeesItsIptablesLegacyRules(t *testing.T) {
	for _, fam := range []struct {
		name string
		v6   bool
		ipt  func(t *testing.T, args ...string) string
	}{{"IPv4", false, legacyIPT}, {"IPv6", true, legacyIP6T}} {
		t.Run(fam.name, func(t *testing.T) {
			ipt := fam.ipt
			chains := []string{"KUBE-SERVICES", "KUBE-POSTROUTING", "KUBE-MARK-MASQ"}
			for _, c := range chains {
				ipt(t, "-t", "nat", "-N", c)
			}
			ipt(t, "-t", "nat", "-A", "PREROUTING", "-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES")
			ipt(t, "-t", "nat", "-A", "POSTROUTING", "-m", "comment", "--comment", "kubernetes postrouting rules", "-j", "KUBE-POSTROUTING")
			t.Cleanup(func() {
				ipt(t, "-t", "nat", "-D", "PREROUTING", "-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES")
				ipt(t, "-t", "nat", "-D", "POSTROUTING", "-m", "comment", "--comment", "kubernetes postrouting rules", "-j", "KUBE-POSTROUTING")
				for _, c := range chains {
					ipt(t, "-t", "nat", "-F", c)
					ipt(t, "-t", "nat", "-X", c)
				}
			})
			servesOnHost(t, "", "with kube-proxy's legacy chains created and linked, still empty")
			ipt(t, "-t", "nat", "-A", "KUBE-MARK-MASQ", "-j", "MARK", "--or-mark", "0x4000")
			ipt(t, "-t", "nat", "-A", "KUBE-POSTROUTING", "-m", "mark", "!", "--mark", "0x4000/0x4000", "-j", "RETURN")
			ipt(t, "-t", "nat", "-A", "KUBE-POSTROUTING", "-j", "MASQUERADE", "--random-fully")
			ipt(t, "-t", "nat", "-A", "KUBE-SERVICES", "-m", "addrtype", "--dst-type", "LOCAL", "-j", "RETURN")
			servesOnHost(t, "iptables-legacy", "with kube-proxy's legacy masquerade written")

			got, err := leftovers.Host{Proc: "/proc"}.LegacyNATChains(fam.v6)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]int{}
			for _, line := range strings.Split(ipt(t, "-t", "nat", "-S"), "\n") {
				f := strings.Fields(line)
				switch {
				case len(f) == 2 && f[0] == "-N":
					want[f[1]] += 0
				case len(f) > 1 && f[0] == "-A" && !strings.Contains("PREROUTING INPUT OUTPUT POSTROUTING", f[1]):
					want[f[1]]++
				}
			}
			if !maps.Equal(got, want) {
				t.Errorf("LegacyNATChains = %v; iptables-legacy lists %v", got, want)
			}
		})
	}
}

// TestKubeProxyServesOnHostSeesItsNftablesMode: kube-proxy's nftables
// mode (tables ip kube-proxy and ip6 kube-proxy) is recognised once its
// masquerading chain holds rules, which its first sync writes with every
// service's rules in one transaction.
func TestKubeProxyServesOnHostSeesItsNftablesMode(t *testing.T) {
	for _, fam := range []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6} {
		c, err := nftables.New()
		if err != nil {
			t.Fatal(err)
		}
		tb := c.AddTable(&nftables.Table{Family: fam, Name: "kube-proxy"})
		masq := c.AddChain(&nftables.Chain{Table: tb, Name: "masquerading"})
		c.AddChain(&nftables.Chain{Table: tb, Name: "nat-postrouting", Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
		if err := c.Flush(); err != nil {
			t.Fatalf("table %d kube-proxy: %v", fam, err)
		}
		servesOnHost(t, "", "with kube-proxy's nftables table and an empty masquerading chain")
		c.AddRule(&nftables.Rule{Table: tb, Chain: masq, Exprs: []expr.Any{&expr.Masq{FullyRandom: true}}})
		if err := c.Flush(); err != nil {
			t.Fatalf("masquerading rule: %v", err)
		}
		servesOnHost(t, "nftables", "with kube-proxy's masquerading rule written")
		c.DelTable(tb)
		if err := c.Flush(); err != nil {
			t.Fatalf("delete table kube-proxy: %v", err)
		}
	}
}
