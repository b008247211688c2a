//go:build integration

package leftovers

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/leftovers"
)

// xtables runs one of Debian's xtables multi-call binaries under the name
// it dispatches on (iptables-nft, ip6tables-legacy-save, ...).
func xtables(t *testing.T, multi, name string, args ...string) string {
	t.Helper()
	path, err := exec.LookPath(multi)
	if err != nil {
		t.Fatalf("%s is not staged into the VM (make integration stages it): %v", multi, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Args[0] = name
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func nftIPT(t *testing.T, args ...string) string {
	return xtables(t, "xtables-nft-multi", "iptables-nft", args...)
}
func nftIP6T(t *testing.T, args ...string) string {
	return xtables(t, "xtables-nft-multi", "ip6tables-nft", args...)
}
func legacyIPT(t *testing.T, args ...string) string {
	return xtables(t, "xtables-legacy-multi", "iptables-legacy", args...)
}

func ipset(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("ipset", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ipset %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func ipsetNames(t *testing.T) []string {
	names := strings.Fields(ipset(t, "list", "-n"))
	slices.Sort(names)
	return names
}

// kubeProxyState writes what kube-proxy v1.36's IPVS mode writes on a
// node, in its own words (pkg/proxy/ipvs: the jump rules with their
// comments, chains referencing ipsets), plus the kubelet's chains and a
// CNI's, which must stay.
func kubeProxyState(t *testing.T) {
	// Cleanups run last first: the set goes after the tables whose rule
	// holds it.
	t.Cleanup(func() { _, _ = exec.Command("ipset", "destroy", "cni-foreign").CombinedOutput() })
	dropIptablesNftTables(t)
	ipset(t, "create", "KUBE-CLUSTER-IP", "hash:ip,port")
	ipset(t, "create", "KUBE-LOOP-BACK", "hash:ip,port,ip")
	ipset(t, "create", "KUBE-NODE-PORT-TCP", "bitmap:port", "range", "0-65535")
	ipset(t, "create", "KUBE-6-CLUSTER-IP", "hash:ip,port", "family", "inet6")
	ipset(t, "create", "cni-foreign", "hash:ip")
	for _, c := range []string{"KUBE-SERVICES", "KUBE-POSTROUTING", "KUBE-NODE-PORT", "KUBE-LOAD-BALANCER", "KUBE-MARK-MASQ"} {
		nftIPT(t, "-t", "nat", "-N", c)
	}
	nftIPT(t, "-t", "nat", "-A", "PREROUTING", "-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES")
	nftIPT(t, "-t", "nat", "-A", "OUTPUT", "-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES")
	nftIPT(t, "-t", "nat", "-A", "POSTROUTING", "-m", "comment", "--comment", "kubernetes postrouting rules", "-j", "KUBE-POSTROUTING")
	nftIPT(t, "-t", "nat", "-A", "KUBE-MARK-MASQ", "-j", "MARK", "--or-mark", "0x4000")
	nftIPT(t, "-t", "nat", "-A", "KUBE-POSTROUTING", "-m", "mark", "--mark", "0x4000/0x4000", "-j", "MASQUERADE", "--random-fully")
	nftIPT(t, "-t", "nat", "-A", "KUBE-SERVICES", "-m", "set", "--match-set", "KUBE-CLUSTER-IP", "dst,dst", "-j", "ACCEPT")
	nftIPT(t, "-t", "nat", "-A", "KUBE-SERVICES", "-m", "set", "--match-set", "KUBE-NODE-PORT-TCP", "dst", "-j", "KUBE-NODE-PORT")
	nftIPT(t, "-t", "nat", "-A", "KUBE-POSTROUTING", "-m", "set", "--match-set", "KUBE-LOOP-BACK", "dst,dst,src", "-j", "MASQUERADE")
	for _, c := range []string{"KUBE-FORWARD", "KUBE-NODE-PORT", "KUBE-PROXY-FIREWALL", "KUBE-SOURCE-RANGES-FIREWALL", "KUBE-IPVS-FILTER", "KUBE-IPVS-OUT-FILTER"} {
		nftIPT(t, "-t", "filter", "-N", c)
	}
	nftIPT(t, "-t", "filter", "-A", "INPUT", "-m", "comment", "--comment", "kubernetes ipvs access filter", "-j", "KUBE-IPVS-FILTER")
	nftIPT(t, "-t", "filter", "-A", "OUTPUT", "-m", "comment", "--comment", "kubernetes ipvs access filter", "-j", "KUBE-IPVS-OUT-FILTER")
	nftIPT(t, "-t", "filter", "-A", "FORWARD", "-m", "comment", "--comment", "kubernetes forwarding rules", "-j", "KUBE-FORWARD")
	nftIPT(t, "-t", "filter", "-A", "KUBE-PROXY-FIREWALL", "-j", "KUBE-SOURCE-RANGES-FIREWALL")
	nftIPT(t, "-t", "filter", "-A", "KUBE-IPVS-FILTER", "-m", "set", "--match-set", "KUBE-CLUSTER-IP", "dst,dst", "-j", "RETURN")
	nftIP6T(t, "-t", "nat", "-N", "KUBE-SERVICES")
	nftIP6T(t, "-t", "nat", "-A", "PREROUTING", "-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES")
	nftIP6T(t, "-t", "nat", "-A", "KUBE-SERVICES", "-m", "set", "--match-set", "KUBE-6-CLUSTER-IP", "dst,dst", "-j", "ACCEPT")
	// The kubelet's and a CNI's: not kube-proxy's.
	nftIPT(t, "-t", "filter", "-N", "KUBE-FIREWALL")
	nftIPT(t, "-t", "filter", "-A", "INPUT", "-j", "KUBE-FIREWALL")
	nftIPT(t, "-t", "filter", "-A", "KUBE-FIREWALL", "-m", "set", "--match-set", "cni-foreign", "src", "-j", "DROP")
	nftIPT(t, "-t", "nat", "-N", "CNI-FOREIGN")
	nftIPT(t, "-t", "nat", "-A", "POSTROUTING", "-j", "CNI-FOREIGN")
}

// dropIptablesNftTables deletes, when t ends, the tables iptables-nft
// made: the lab's next packages (one VM boot) expect no table but theirs.
func dropIptablesNftTables(t *testing.T) {
	t.Cleanup(func() {
		conn, err := nftables.New()
		if err != nil {
			t.Errorf("nftables: %v", err)
			return
		}
		for _, tb := range []*nftables.Table{{Family: nftables.TableFamilyIPv4, Name: "nat"}, {Family: nftables.TableFamilyIPv4, Name: "filter"},
			{Family: nftables.TableFamilyIPv6, Name: "nat"}, {Family: nftables.TableFamilyIPv6, Name: "filter"}} {
			conn.DelTable(tb)
			if err := conn.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
				t.Errorf("delete table %s: %v", tb.Name, err)
			}
		}
	})
}

// TestKubeProxyServesOnlyOnceItsFirstSyncWroteItsRules: kube-proxy's
// first sync creates and links its nat chains empty long before its
// iptables-restore fills them (seconds, on a busy node); our table must
// not go (--cleanup-table-only) on the empty chains, only once the
// masquerade is written.
func TestKubeProxyServesOnlyOnceItsFirstSyncWroteItsRules(t *testing.T) {
	dropIptablesNftTables(t)
	for _, c := range []string{"KUBE-SERVICES", "KUBE-POSTROUTING", "KUBE-MARK-MASQ"} {
		nftIPT(t, "-t", "nat", "-N", c)
	}
	nftIPT(t, "-t", "nat", "-A", "PREROUTING", "-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES")
	nftIPT(t, "-t", "nat", "-A", "POSTROUTING", "-m", "comment", "--comment", "kubernetes postrouting rules", "-j", "KUBE-POSTROUTING")
	if form, err := leftovers.KubeProxyServesOnHost(); err != nil || form != "" {
		t.Errorf("KubeProxyServesOnHost = %q, %v with kube-proxy's chains created and linked, still empty; want none", form, err)
	}
	nftIPT(t, "-t", "nat", "-A", "KUBE-MARK-MASQ", "-j", "MARK", "--or-mark", "0x4000")
	nftIPT(t, "-t", "nat", "-A", "KUBE-POSTROUTING", "-m", "mark", "!", "--mark", "0x4000/0x4000", "-j", "RETURN")
	nftIPT(t, "-t", "nat", "-A", "KUBE-POSTROUTING", "-j", "MASQUERADE", "--random-fully")
	nftIPT(t, "-t", "nat", "-A", "KUBE-SERVICES", "-s", "127.0.0.0/8", "-j", "RETURN")
	if form, err := leftovers.KubeProxyServesOnHost(); err != nil || form != "iptables-nft" {
		t.Errorf("KubeProxyServesOnHost = %q, %v with kube-proxy's masquerade written; want iptables-nft", form, err)
	}
}

// TestKubeProxysIptablesNftChainsAndIPSetsAreRemovedOthersStay: kube-proxy
// is seen serving before (what --cleanup-table-only waits for) and not
// after; after Remove, no chain or ipset of kube-proxy's is left in either family,
// nor a rule jumping to one; the kubelet's KUBE-FIREWALL, a CNI's chain,
// their jumps and a foreign ipset are untouched; a second Remove finds
// nothing.
func TestKubeProxysIptablesNftChainsAndIPSetsAreRemovedOthersStay(t *testing.T) {
	kubeProxyState(t)
	if form, err := leftovers.KubeProxyServesOnHost(); err != nil || form != "iptables-nft" {
		t.Errorf("KubeProxyServesOnHost = %q, %v with kube-proxy's chains written by iptables-nft; want iptables-nft", form, err)
	}
	res, err := leftovers.RemoveFromHost()
	if err != nil {
		t.Fatalf("Remove: %v (result %+v)", err, res)
	}
	t.Logf("removed: %d rules %v; %d chains %v; ipsets %v", len(res.Rules), res.Rules, len(res.Chains), res.Chains, res.IPSets)
	if len(res.Stuck) > 0 {
		t.Errorf("stuck ipsets %v; want none (no legacy rules)", res.Stuck)
	}
	save := nftIPT(t, "-t", "nat", "-S") + nftIPT(t, "-t", "filter", "-S") + nftIP6T(t, "-t", "nat", "-S")
	for _, gone := range []string{"KUBE-SERVICES", "KUBE-POSTROUTING", "KUBE-MARK-MASQ", "KUBE-NODE-PORT",
		"KUBE-LOAD-BALANCER", "KUBE-FORWARD", "KUBE-PROXY-FIREWALL", "KUBE-SOURCE-RANGES-FIREWALL",
		"KUBE-IPVS-FILTER", "KUBE-IPVS-OUT-FILTER"} {
		if strings.Contains(save, gone) {
			t.Errorf("%s is still in the ruleset:\n%s", gone, save)
		}
	}
	for _, stays := range []string{"-N KUBE-FIREWALL", "-A INPUT -j KUBE-FIREWALL", "--match-set cni-foreign src -j DROP",
		"-N CNI-FOREIGN", "-A POSTROUTING -j CNI-FOREIGN"} {
		if !strings.Contains(save, stays) {
			t.Errorf("%q is gone from the ruleset; it is not kube-proxy's:\n%s", stays, save)
		}
	}
	if got, want := ipsetNames(t), []string{"cni-foreign"}; !slices.Equal(got, want) {
		t.Errorf("ipsets left: %v; want %v", got, want)
	}
	if form, err := leftovers.KubeProxyServesOnHost(); err != nil || form != "" {
		t.Errorf("KubeProxyServesOnHost = %q, %v after Remove; want none", form, err)
	}
	again, err := leftovers.RemoveFromHost()
	if err != nil || !again.Empty() {
		t.Errorf("second Remove = %+v, %v; want nothing to do", again, err)
	}
}

// TestAnIPSetHeldByAForeignIptablesLegacyRuleIsReportedStuckWithTheLegacyTables:
// a rule outside kube-proxy's chains that matches one of its ipsets is
// not kube-proxy's to remove; the ipset it holds is reported, with the
// legacy table, and the rest of the cleanup still runs.
func TestAnIPSetHeldByAForeignIptablesLegacyRuleIsReportedStuckWithTheLegacyTables(t *testing.T) {
	ipset(t, "create", "KUBE-IPVS-IPS", "hash:ip")
	legacyIPT(t, "-t", "filter", "-N", "FOREIGN-FILTER")
	legacyIPT(t, "-t", "filter", "-A", "FOREIGN-FILTER", "-m", "set", "--match-set", "KUBE-IPVS-IPS", "dst", "-j", "RETURN")
	t.Cleanup(func() {
		legacyIPT(t, "-t", "filter", "-F", "FOREIGN-FILTER")
		legacyIPT(t, "-t", "filter", "-X", "FOREIGN-FILTER")
		ipset(t, "destroy", "KUBE-IPVS-IPS")
	})
	res, err := leftovers.RemoveFromHost()
	if err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if !slices.Equal(res.Stuck, []string{"KUBE-IPVS-IPS"}) || !slices.Contains(res.LegacyTables, "ip filter") || len(res.Legacy) > 0 {
		t.Fatalf("Remove = %+v; want KUBE-IPVS-IPS stuck, the legacy table ip filter named, no legacy chain removed", res)
	}
	if _, err := os.Stat("/proc/net/ip_tables_names"); err != nil {
		t.Fatalf("no legacy tables file: %v", err)
	}
}
