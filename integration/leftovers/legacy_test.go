//go:build integration

package leftovers

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/leftovers"
)

// legacyNAT, legacyFilter and legacyMangle are what kube-proxy v1.36's
// IPVS mode writes with iptables-legacy (its chains, jumps and ipset
// matches, in its words), beside the kubelet's chains and foreign ones
// whose rules must stay, with their counters and in their order: a rule
// without a target, a goto to a kube-proxy chain from a foreign chain, a
// foreign jump to the kubelet's chain. iptables-legacy-restore -c input.
const legacyNAT = `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:CNI-FOREIGN - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
:KUBE-LOAD-BALANCER - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-PROXY-CANARY - [0:0]
:KUBE-SERVICES - [0:0]
[0:0] -A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
[7:700] -A PREROUTING -s 10.244.0.0/16 -j CNI-FOREIGN
[0:0] -A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
[6:600] -A POSTROUTING -m comment --comment "foreign, no target"
[0:0] -A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
[5:500] -A POSTROUTING -j CNI-FOREIGN
[3:300] -A CNI-FOREIGN -d 10.244.0.0/16 -j ACCEPT
[0:0] -A CNI-FOREIGN -j RETURN
[0:0] -A KUBE-LOAD-BALANCER -j KUBE-MARK-MASQ
[0:0] -A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
[0:0] -A KUBE-NODE-PORT -p tcp -m set --match-set KUBE-NODE-PORT-TCP dst -j KUBE-MARK-MASQ
[0:0] -A KUBE-POSTROUTING -m set --match-set KUBE-LOOP-BACK dst,dst,src -j MASQUERADE
[0:0] -A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
[0:0] -A KUBE-POSTROUTING -j MARK --xor-mark 0x4000
[0:0] -A KUBE-POSTROUTING -j MASQUERADE --random-fully
[0:0] -A KUBE-SERVICES ! -s 10.244.0.0/16 -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ
[0:0] -A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT
[0:0] -A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT
COMMIT
`

const legacyFilter = `*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:FOREIGN - [0:0]
:KUBE-FIREWALL - [0:0]
:KUBE-FORWARD - [0:0]
:KUBE-IPVS-FILTER - [0:0]
:KUBE-IPVS-OUT-FILTER - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-PROXY-CANARY - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
:KUBE-SOURCE-RANGES-FIREWALL - [0:0]
[8:800] -A INPUT -j KUBE-FIREWALL
[0:0] -A INPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-FILTER
[0:0] -A INPUT -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
[0:0] -A INPUT -m comment --comment "kubernetes health check rules" -j KUBE-NODE-PORT
[9:900] -A INPUT -j FOREIGN
[0:0] -A FORWARD -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
[0:0] -A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
[4:400] -A FORWARD -j FOREIGN
[1:100] -A OUTPUT -j KUBE-FIREWALL
[0:0] -A OUTPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-OUT-FILTER
[0:0] -A OUTPUT -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
[0:0] -A FOREIGN -s 10.9.9.9/32 -g KUBE-PROXY-FIREWALL
[2:200] -A FOREIGN -m set --match-set cni-foreign src -j DROP
[0:0] -A FOREIGN -j KUBE-FIREWALL
[0:0] -A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -j DROP
[0:0] -A KUBE-FORWARD -m mark --mark 0x4000/0x4000 -j ACCEPT
[0:0] -A KUBE-FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
[0:0] -A KUBE-IPVS-FILTER -m set --match-set KUBE-LOAD-BALANCER dst,dst -j RETURN
[0:0] -A KUBE-IPVS-FILTER -m set --match-set KUBE-CLUSTER-IP dst,dst -j RETURN
[0:0] -A KUBE-IPVS-FILTER -m set --match-set KUBE-IPVS-IPS dst -j REJECT --reject-with icmp-port-unreachable
[0:0] -A KUBE-NODE-PORT -m set --match-set KUBE-HEALTH-CHECK-NODE-PORT dst -j ACCEPT
[0:0] -A KUBE-PROXY-FIREWALL -j KUBE-SOURCE-RANGES-FIREWALL
[0:0] -A KUBE-SOURCE-RANGES-FIREWALL -j DROP
COMMIT
`

const legacyMangle = `*mangle
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-KUBELET-CANARY - [0:0]
:KUBE-PROXY-CANARY - [0:0]
COMMIT
`

const legacyNAT6 = `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-SERVICES - [0:0]
[0:0] -A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
[0:0] -A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
[1:100] -A POSTROUTING -s fd00::/8 -j MASQUERADE
[0:0] -A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
[0:0] -A KUBE-POSTROUTING -j MASQUERADE
[0:0] -A KUBE-SERVICES -m set --match-set KUBE-6-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ
COMMIT
`

const legacyFilter6 = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-FIREWALL - [0:0]
:KUBE-FORWARD - [0:0]
[0:0] -A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
[3:300] -A FORWARD -s fd00::/8 -j ACCEPT
[0:0] -A KUBE-FORWARD -m mark --mark 0x4000/0x4000 -j ACCEPT
COMMIT
`

// legacySave runs iptables-legacy-save -c (ip6tables-legacy-save) for a
// table, without its comment lines (they carry the time).
func legacySave(t *testing.T, v6 bool, table string) string {
	name := "iptables-legacy-save"
	if v6 {
		name = "ip6tables-legacy-save"
	}
	var out []string
	for _, l := range strings.Split(xtables(t, "xtables-legacy-multi", name, "-c", "-t", table), "\n") {
		if !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// legacyRestore loads rules with iptables-legacy-restore -c.
func legacyRestore(t *testing.T, v6 bool, rules string) {
	t.Helper()
	name := "iptables-legacy-restore"
	if v6 {
		name = "ip6tables-legacy-restore"
	}
	path, err := exec.LookPath("xtables-legacy-multi")
	if err != nil {
		t.Fatalf("xtables-legacy-multi is not staged into the VM: %v", err)
	}
	cmd := exec.Command(path, "-c")
	cmd.Args[0] = name
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s\n%s", name, err, out, rules)
	}
}

// kubeProxyLegacyChains is kube-proxy's chain list by table, written out
// here so that the test does not follow the list it tests.
var kubeProxyLegacyChains = map[string][]string{
	"nat": {"KUBE-SERVICES", "KUBE-POSTROUTING", "KUBE-NODE-PORT", "KUBE-LOAD-BALANCER", "KUBE-MARK-MASQ", "KUBE-PROXY-CANARY"},
	"filter": {"KUBE-FORWARD", "KUBE-NODE-PORT", "KUBE-PROXY-FIREWALL", "KUBE-SOURCE-RANGES-FIREWALL",
		"KUBE-IPVS-FILTER", "KUBE-IPVS-OUT-FILTER", "KUBE-PROXY-CANARY"},
	"mangle": {"KUBE-PROXY-CANARY"},
}

// withoutKubeProxy is an iptables-legacy-save text with kube-proxy's
// chains of the table, their rules, and every rule jumping or going to
// one left out: what removing them by hand with iptables-legacy leaves.
func withoutKubeProxy(save string, doomed []string) string {
	var out []string
	for _, line := range strings.Split(save, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && strings.HasPrefix(f[0], "[") {
			f = f[1:]
		}
		drop := len(f) > 0 && strings.HasPrefix(f[0], ":") && slices.Contains(doomed, f[0][1:])
		drop = drop || len(f) > 1 && f[0] == "-A" && slices.Contains(doomed, f[1])
		for i := 0; i+1 < len(f); i++ {
			drop = drop || (f[i] == "-j" || f[i] == "-g") && slices.Contains(doomed, f[i+1])
		}
		if !drop {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestKubeProxysIptablesLegacyChainsAndIPSetsAreRemovedOthersStay:
// kube-proxy's legacy chains, in ip nat, filter, mangle and ip6 nat and
// filter, go with every rule that jumps or goes to one, without running
// iptables, but for KUBE-FORWARD where FORWARD's policy is DROP;
// every other rule stays in its order with its counters, the kubelet's
// chains included (iptables-legacy-save -c shows exactly the before with
// kube-proxy's lines left out); the ipsets the chains held are destroyed,
// a foreign one stays; a second run finds nothing.
func TestKubeProxysIptablesLegacyChainsAndIPSetsAreRemovedOthersStay(t *testing.T) {
	for _, s := range [][]string{{"KUBE-CLUSTER-IP", "hash:ip,port"}, {"KUBE-LOOP-BACK", "hash:ip,port,ip"},
		{"KUBE-NODE-PORT-TCP", "bitmap:port", "range", "0-65535"}, {"KUBE-LOAD-BALANCER", "hash:ip,port"},
		{"KUBE-IPVS-IPS", "hash:ip"}, {"KUBE-HEALTH-CHECK-NODE-PORT", "bitmap:port", "range", "0-65535"},
		{"KUBE-6-CLUSTER-IP", "hash:ip,port", "family", "inet6"}, {"cni-foreign", "hash:ip"}} {
		ipset(t, append([]string{"-exist", "create"}, s...)...)
	}
	t.Cleanup(func() {
		legacyRestore(t, false, "*nat\nCOMMIT\n*filter\n:FORWARD ACCEPT [0:0]\nCOMMIT\n*mangle\nCOMMIT\n")
		legacyRestore(t, true, "*nat\nCOMMIT\n*filter\nCOMMIT\n")
		ipset(t, "destroy")
	})
	legacyRestore(t, false, legacyNAT+legacyFilter+legacyMangle)
	legacyRestore(t, true, legacyNAT6+legacyFilter6)
	// ip filter's FORWARD policy is DROP: its KUBE-FORWARD stays, the
	// accept such a node needs.
	ipFilter := slices.DeleteFunc(slices.Clone(kubeProxyLegacyChains["filter"]), func(c string) bool { return c == "KUBE-FORWARD" })
	tables := []struct {
		v6     bool
		table  string
		doomed []string
	}{{false, "nat", kubeProxyLegacyChains["nat"]}, {false, "filter", ipFilter}, {false, "mangle", kubeProxyLegacyChains["mangle"]},
		{true, "nat", kubeProxyLegacyChains["nat"]}, {true, "filter", kubeProxyLegacyChains["filter"]}}
	want := map[int]string{}
	for i, tb := range tables {
		want[i] = withoutKubeProxy(legacySave(t, tb.v6, tb.table), tb.doomed)
	}
	res, err := leftovers.RemoveFromHost()
	if err != nil {
		t.Fatalf("Remove: %v (result %+v)", err, res)
	}
	for _, l := range res.Legacy {
		t.Logf("removed from %s: %d chains %v, %d jump rules %v", l.Table, len(l.Chains), l.Chains, len(l.Rules), l.Rules)
	}
	t.Logf("ipsets destroyed %v, stuck %v", res.IPSets, res.Stuck)
	if len(res.Legacy) != 5 {
		t.Errorf("removed from %d legacy tables; want 5 (ip nat, filter, mangle; ip6 nat, filter)", len(res.Legacy))
	}
	for i, tb := range tables {
		if got := legacySave(t, tb.v6, tb.table); got != want[i] {
			t.Errorf("v6=%v %s after the removal:\n%s\nwant (before, less kube-proxy's lines):\n%s", tb.v6, tb.table, got, want[i])
		}
	}
	if len(res.Stuck) > 0 {
		t.Errorf("stuck ipsets %v; want none", res.Stuck)
	}
	if got, want := ipsetNames(t), []string{"cni-foreign"}; !slices.Equal(got, want) {
		t.Errorf("ipsets left: %v; want %v", got, want)
	}
	again, err := leftovers.RemoveFromHost()
	if err != nil || !again.Empty() {
		t.Errorf("second Remove = %+v, %v; want nothing to do", again, err)
	}
}
