package leftovers

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// kube-proxy's chains in its IPVS mode, by table (pkg/proxy/ipvs's
// iptablesCleanupChains), and the canary chain of its iptables-based
// modes.
var kubeProxyChains = map[string][]string{
	"nat": {"KUBE-SERVICES", "KUBE-POSTROUTING", "KUBE-NODE-PORT", "KUBE-LOAD-BALANCER",
		"KUBE-MARK-MASQ", "KUBE-PROXY-CANARY"},
	"filter": {"KUBE-FORWARD", "KUBE-NODE-PORT", "KUBE-PROXY-FIREWALL", "KUBE-SOURCE-RANGES-FIREWALL",
		"KUBE-IPVS-FILTER", "KUBE-IPVS-OUT-FILTER", "KUBE-PROXY-CANARY"},
	"mangle": {"KUBE-PROXY-CANARY"},
}

// kube-proxy's ipsets in its IPVS mode (pkg/proxy/ipvs's ipsetInfo), as
// named for IPv4; IPv6 ones are the same with KUBE-6- (ipv6Name).
var kubeProxyIPSets = []string{
	"KUBE-LOOP-BACK", "KUBE-CLUSTER-IP", "KUBE-EXTERNAL-IP", "KUBE-EXTERNAL-IP-LOCAL",
	"KUBE-LOAD-BALANCER", "KUBE-LOAD-BALANCER-FW", "KUBE-LOAD-BALANCER-LOCAL",
	"KUBE-LOAD-BALANCER-SOURCE-IP", "KUBE-LOAD-BALANCER-SOURCE-CIDR",
	"KUBE-NODE-PORT-TCP", "KUBE-NODE-PORT-LOCAL-TCP", "KUBE-NODE-PORT-UDP",
	"KUBE-NODE-PORT-LOCAL-UDP", "KUBE-NODE-PORT-SCTP-HASH", "KUBE-NODE-PORT-LOCAL-SCTP-HASH",
	"KUBE-HEALTH-CHECK-NODE-PORT", "KUBE-IPVS-IPS",
}

// ipv6Name is kube-proxy's name for the IPv6 twin of an ipset: KUBE- becomes
// KUBE-6-, cut to the 31 bytes an ipset name may have.
func ipv6Name(name string) string {
	n := strings.Replace(name, "KUBE-", "KUBE-6-", 1)
	if len(n) > 31 {
		n = n[:31]
	}
	return n
}

// Tables is the part of *nftables.Conn that Remove uses.
type Tables interface {
	ListChainsOfTableFamily(family nftables.TableFamily) ([]*nftables.Chain, error)
	GetRules(t *nftables.Table, c *nftables.Chain) ([]*nftables.Rule, error)
	DelRule(r *nftables.Rule) error
	FlushChain(c *nftables.Chain)
	DelChain(c *nftables.Chain)
	Flush() error
}

// IPSets destroys ipsets; Host implements it over netlink.
type IPSets interface {
	// Loaded says whether the kernel has ipset support loaded; without it
	// there is no ipset.
	Loaded() bool
	// Destroy destroys one ipset: ErrNotFound when there is none of the
	// name, ErrInUse when a rule references it.
	Destroy(name string) error
}

// Legacy is iptables-legacy's tables; Host implements it over x_tables.
type Legacy interface {
	// LegacyTables lists the tables the kernel holds, as "ip nat".
	LegacyTables() []string
	// RemoveLegacyChains removes kube-proxy's chains, with the rules
	// that jump to them, and says what it removed from which table.
	RemoveLegacyChains() ([]LegacyRemoval, error)
}

// Result is what Remove found and did.
type Result struct {
	// Rules are the rules deleted from chains that stay, as "ip filter
	// INPUT -> KUBE-NODE-PORT".
	Rules []string
	// Chains are the chains deleted, as "ip nat KUBE-SERVICES".
	Chains []string
	// IPSets are the ipsets destroyed.
	IPSets []string
	// Legacy are the chains and rules removed from iptables-legacy's
	// tables, one entry per table changed.
	Legacy []LegacyRemoval
	// Stuck are kube-proxy's ipsets that could not be destroyed: in use
	// by a rule that is not kube-proxy's, or in an iptables-legacy table
	// that could not be changed.
	Stuck []string
	// LegacyTables are the iptables-legacy tables the kernel holds
	// ("ip nat", "ip6 filter"), reported with Stuck ipsets.
	LegacyTables []string
}

// Empty says that there was nothing of kube-proxy's to remove.
func (r Result) Empty() bool {
	return len(r.Rules)+len(r.Chains)+len(r.Legacy)+len(r.IPSets)+len(r.Stuck) == 0
}

// Remove deletes kube-proxy's chains (with every rule that jumps to
// them), those of iptables-nft and then those of iptables-legacy, and
// then its ipsets, which its rules may reference. An error in one family,
// one table or one ipset does not stop the others; the errors are joined.
func Remove(t Tables, s IPSets, x Legacy) (Result, error) {
	return remove(t, s, x, time.Sleep)
}

// remove is Remove, with sleep waiting between the tries of an ipset
// still in use.
func remove(t Tables, s IPSets, x Legacy, sleep func(time.Duration)) (Result, error) {
	var res Result
	var errs []error
	for _, fam := range []struct {
		family nftables.TableFamily
		name   string
	}{{nftables.TableFamilyIPv4, "ip"}, {nftables.TableFamilyIPv6, "ip6"}} {
		if err := removeChains(t, fam.family, fam.name, &res); err != nil {
			errs = append(errs, fmt.Errorf("%s tables: %w", fam.name, err))
		}
	}
	legacy, err := x.RemoveLegacyChains()
	res.Legacy = legacy
	if err != nil {
		errs = append(errs, err)
	}
	if err := removeIPSets(s, &res, sleep); err != nil {
		errs = append(errs, err)
	}
	if len(res.Stuck) > 0 {
		res.LegacyTables = x.LegacyTables()
	}
	return res, errors.Join(errs...)
}

// removeChains deletes kube-proxy's chains of one family in one batch: the
// rules of other chains that jump to them, then the chains, flushed
// first (which also drops their jumps to each other).
func removeChains(t Tables, family nftables.TableFamily, famName string, res *Result) error {
	chains, err := t.ListChainsOfTableFamily(family)
	if err != nil {
		return fmt.Errorf("list chains: %w", err)
	}
	doomed := map[string]map[string]bool{} // table → chain names to delete
	for _, c := range chains {
		if slices.Contains(kubeProxyChains[c.Table.Name], c.Name) {
			if doomed[c.Table.Name] == nil {
				doomed[c.Table.Name] = map[string]bool{}
			}
			doomed[c.Table.Name][c.Name] = true
		}
	}
	if len(doomed) == 0 {
		return nil
	}
	var rules, deleted []string
	for _, c := range chains {
		d := doomed[c.Table.Name]
		if d == nil || d[c.Name] {
			continue
		}
		rs, err := t.GetRules(c.Table, c)
		if err != nil {
			return fmt.Errorf("list the rules of %s %s %s: %w", famName, c.Table.Name, c.Name, err)
		}
		for _, r := range rs {
			target := jumpTarget(r)
			if !d[target] {
				continue
			}
			if err := t.DelRule(r); err != nil {
				return fmt.Errorf("delete rule %d of %s %s %s: %w", r.Handle, famName, c.Table.Name, c.Name, err)
			}
			rules = append(rules, fmt.Sprintf("%s %s %s -> %s", famName, c.Table.Name, c.Name, target))
		}
	}
	for _, c := range chains {
		if doomed[c.Table.Name][c.Name] {
			t.FlushChain(c)
		}
	}
	for _, c := range chains {
		if doomed[c.Table.Name][c.Name] {
			t.DelChain(c)
			deleted = append(deleted, fmt.Sprintf("%s %s %s", famName, c.Table.Name, c.Name))
		}
	}
	if err := t.Flush(); err != nil {
		return fmt.Errorf("delete %d chains and %d rules: %w", len(deleted), len(rules), err)
	}
	res.Rules = append(res.Rules, rules...)
	res.Chains = append(res.Chains, deleted...)
	return nil
}

// jumpTarget is the chain a rule jumps or goes to, or "".
func jumpTarget(r *nftables.Rule) string {
	for _, e := range r.Exprs {
		if v, ok := e.(*expr.Verdict); ok && (v.Kind == expr.VerdictJump || v.Kind == expr.VerdictGoto) {
			return v.Chain
		}
	}
	return ""
}

// removeIPSets destroys kube-proxy's ipsets of both families, by name as
// kube-proxy's own cleanup does (listing every set would decode whatever
// else the node holds). One still referenced by a rule is Stuck, not an
// error: the rules that hold it are not ours to see.
func removeIPSets(s IPSets, res *Result, sleep func(time.Duration)) error {
	if !s.Loaded() {
		return nil
	}
	var names []string
	for _, n4 := range kubeProxyIPSets {
		names = append(names, n4, ipv6Name(n4))
	}
	inUse, err := destroyIPSets(s, names, res)
	// The rules just deleted may release their references after the
	// transaction, from a kernel work queue: on 5.10 the sets were in use
	// right after the rules went and free a moment later.
	if len(res.Rules)+len(res.Chains)+len(res.Legacy) > 0 {
		for waited := time.Duration(0); len(inUse) > 0 && err == nil && waited < refReleaseWait; waited += refReleaseEvery {
			sleep(refReleaseEvery)
			inUse, err = destroyIPSets(s, inUse, res)
		}
	}
	res.Stuck = append(res.Stuck, inUse...)
	return err
}

// How long removeIPSets waits for deleted rules to release the ipsets
// they referenced, and how often it tries again.
const (
	refReleaseWait  = 2 * time.Second
	refReleaseEvery = 50 * time.Millisecond
)

// destroyIPSets destroys the named ipsets, recording each destroyed one in
// res, and returns those still in use.
func destroyIPSets(s IPSets, names []string, res *Result) (inUse []string, err error) {
	var errs []error
	for _, n := range names {
		switch err := s.Destroy(n); {
		case err == nil:
			res.IPSets = append(res.IPSets, n)
		case errors.Is(err, ErrNotFound):
		case errors.Is(err, ErrInUse):
			inUse = append(inUse, n)
		default:
			errs = append(errs, fmt.Errorf("destroy ipset %s: %w", n, err))
		}
	}
	return inUse, errors.Join(errs...)
}

// ErrInUse is an ipset that a rule still references; ErrNotFound one that
// does not exist.
var (
	ErrInUse    = errors.New("ipset in use by a rule")
	ErrNotFound = errors.New("no such ipset")
)

// KubeProxyServes says whether kube-proxy's rules are in the kernel as
// nftables objects in a family: its nat table's KUBE-SERVICES and
// KUBE-POSTROUTING both hold rules. Our table may go only then, after a
// rollback: until kube-proxy's masquerade is there, ours is the only one
// (--cleanup-table-only waits for it). The chains alone are no sign:
// kube-proxy's first sync creates them and links them empty, then fills
// its ipsets and programs IPVS, and only at its end writes every rule in
// one iptables-restore, which also fills KUBE-POSTROUTING. Rules of
// iptables-legacy are not seen here (LegacyNATChains reads them).
func KubeProxyServes(t Tables) (bool, error) {
	for _, fam := range []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6} {
		chains, err := t.ListChainsOfTableFamily(fam)
		if err != nil {
			return false, fmt.Errorf("list chains: %w", err)
		}
		filled := 0
		for _, c := range chains {
			if c.Table.Name != "nat" || (c.Name != "KUBE-SERVICES" && c.Name != "KUBE-POSTROUTING") {
				continue
			}
			rules, err := t.GetRules(c.Table, c)
			if err != nil {
				return false, fmt.Errorf("list rules of chain %s in table %s: %w", c.Name, c.Table.Name, err)
			}
			if len(rules) > 0 {
				filled++
			}
		}
		if filled == 2 {
			return true, nil
		}
	}
	return false, nil
}

// kubeProxyNFTTable and kubeProxyNFTMasquerading are kube-proxy's
// nftables mode's table (in families ip and ip6) and the chain its
// masquerade rules are in.
const (
	kubeProxyNFTTable        = "kube-proxy"
	kubeProxyNFTMasquerading = "masquerading"
)

// KubeProxyNFTablesServes says whether kube-proxy's nftables mode (mode:
// nftables, upstream's way out of IPVS mode) has synced in a family: its
// table's masquerading chain holds rules. kube-proxy writes its whole
// table, every service's rules with the masquerade, in one transaction
// per sync, so rules there mean its first sync is in.
func KubeProxyNFTablesServes(t Tables) (bool, error) {
	for _, fam := range []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6} {
		chains, err := t.ListChainsOfTableFamily(fam)
		if err != nil {
			return false, fmt.Errorf("list chains: %w", err)
		}
		for _, c := range chains {
			if c.Table.Name != kubeProxyNFTTable || c.Name != kubeProxyNFTMasquerading {
				continue
			}
			rules, err := t.GetRules(c.Table, c)
			if err != nil {
				return false, fmt.Errorf("list rules of chain %s in table %s: %w", c.Name, c.Table.Name, err)
			}
			if len(rules) > 0 {
				return true, nil
			}
		}
	}
	return false, nil
}
