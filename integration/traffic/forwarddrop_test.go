//go:build integration

package traffic

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// ourForwardComment starts the comment of the accept rule the data plane
// keeps in other tables' forward chains (nft/forward.go).
const ourForwardComment = "kube-ipvs-proxy: accept forwarded service traffic"

// iptablesNft runs Debian's iptables-nft or ip6tables-nft (staged into
// the VM by `make integration`, as integration/leftovers uses them).
func iptablesNft(t *testing.T, name string, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("xtables-nft-multi")
	if err != nil {
		t.Fatalf("xtables-nft-multi is not staged into the VM (make integration stages it): %v", err)
	}
	cmd := exec.Command(path, args...)
	cmd.Args[0] = name
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// systemNftLists has Debian's nft (staged into the VM by `make
// integration`; bookworm's 1.0.6, which once aborted on our forward
// rules) list the ruleset and our table, as an operator does.
func systemNftLists(t *testing.T) {
	t.Helper()
	path, err := exec.LookPath("nft")
	if err != nil {
		t.Fatalf("nft is not staged into the VM (make integration stages it): %v", err)
	}
	for _, args := range [][]string{{"list", "ruleset"}, {"list", "table", "inet", nft.TableName}} {
		if out, err := exec.Command(path, args...).CombinedOutput(); err != nil {
			t.Errorf("nft %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// dropTablesAtEnd deletes the given tables when t ends (after the lab's
// own cleanup, registered later): the next tests of the boot expect no
// table but theirs.
func dropTablesAtEnd(t *testing.T, tables ...*nftables.Table) {
	t.Cleanup(func() {
		c, err := nftables.New()
		if err != nil {
			t.Errorf("nftables: %v", err)
			return
		}
		for _, tb := range tables {
			c.DelTable(tb)
			if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
				t.Errorf("delete table %s: %v", tb.Name, err)
			}
		}
	})
}

// TestForwardPolicyDropStillForwardsServiceReplies: node-a's FORWARD
// drops by policy, as Docker's `iptables -P FORWARD DROP` (iptables-nft)
// and a firewalld-style inet filter forward chain do; a NodePort whose
// endpoint is node-b's own address (a host-network endpoint on another
// node: an ingress controller) still answers the external client in
// both families, because the masqueraded replies, which node-a forwards,
// are marked by filter-forward and accepted by the rule the data plane
// keeps at the head of each such chain. iptables-nft still lists its
// chain, with our rule as a mark match and a comment, and Debian's nft
// lists the whole ruleset. Cleanup removes our rule and nothing else.
func TestForwardPolicyDropStillForwardsServiceReplies(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tables []*nftables.Table
		drop   func(t *testing.T)
		list   func(t *testing.T) string // the chains as their owner lists them
		want   string                    // in the listing of our rule
	}{
		{name: "iptables-nft FORWARD policy DROP (Docker)",
			tables: []*nftables.Table{{Family: nftables.TableFamilyIPv4, Name: "filter"}, {Family: nftables.TableFamilyIPv6, Name: "filter"}},
			drop: func(t *testing.T) {
				iptablesNft(t, "iptables-nft", "-P", "FORWARD", "DROP")
				iptablesNft(t, "ip6tables-nft", "-P", "FORWARD", "DROP")
			},
			list: func(t *testing.T) string {
				return iptablesNft(t, "iptables-nft", "-S", "FORWARD") + iptablesNft(t, "ip6tables-nft", "-S", "FORWARD")
			},
			want: "-A FORWARD -m mark --mark 0x4000/0x4000 -m comment --comment \"" + ourForwardComment},
		{name: "an inet filter forward chain of policy drop (firewalld's style)",
			tables: []*nftables.Table{{Family: nftables.TableFamilyINet, Name: "filter"}},
			drop:   addInetForwardDrop,
			list:   func(t *testing.T) string { return inetForwardRules(t) },
			want:   ourForwardComment},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dropTablesAtEnd(t, tc.tables...)
			l := newLab(t)
			nodeB := l.node("node-b")
			l.serve(nodeB.host, "node-b", podTCPPort, podUDPPort)
			s := service("hostnet-ingress", []string{"10.96.14.1", "fd00:96::14:1"}, nodePorts(30090, 30091))
			l.setService(s,
				policy.Endpoint{Address: nodeB.v4, Ready: true, Serving: true, Place: &policy.Place{NodeName: "node-b", Zone: nodeB.zone}},
				policy.Endpoint{Address: nodeB.v6, Ready: true, Serving: true, Place: &policy.Place{NodeName: "node-b", Zone: nodeB.zone}})
			tc.drop(t)
			l.resync()
			for _, addr := range []string{hostPort(l.root.v4, 30090), hostPort(l.root.v6, 30090)} {
				l.expectOnly(t, l.client, addr, TCP, nConns, "node-b")
			}
			systemNftLists(t)
			listed := tc.list(t)
			if strings.Contains(listed, "incompatible") {
				t.Errorf("the chain's owner no longer reads it:\n%s", listed)
			}
			if n := strings.Count(listed, tc.want); n != len(tc.tables) {
				t.Errorf("our accept rule listed %d times, want %d (one per chain):\n%s", n, len(tc.tables), listed)
			}
			t.Logf("the chains as their owner lists them:\n%s", listed)

			if err := l.dp.Cleanup(); err != nil {
				t.Fatalf("Cleanup: %v", err)
			}
			if listed := tc.list(t); strings.Contains(listed, ourForwardComment) {
				t.Errorf("after Cleanup our rule is still listed:\n%s", listed)
			}
		})
	}
}

// addInetForwardDrop makes table inet filter with an empty forward chain
// of policy drop, as a hardened host's nftables.conf has.
func addInetForwardDrop(t *testing.T) {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	tb := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "filter"})
	drop := nftables.ChainPolicyDrop
	c.AddChain(&nftables.Chain{Table: tb, Name: "forward", Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &drop})
	if err := c.Flush(); err != nil {
		t.Fatalf("add inet filter forward: %v", err)
	}
}

// inetForwardRules lists the comments of inet filter forward's rules
// (empty for a rule without one), one a line.
func inetForwardRules(t *testing.T) string {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	tb := &nftables.Table{Family: nftables.TableFamilyINet, Name: "filter"}
	rules, err := c.GetRules(tb, &nftables.Chain{Table: tb, Name: "forward"})
	if err != nil {
		t.Fatalf("rules of inet filter forward: %v", err)
	}
	var b strings.Builder
	for _, r := range rules {
		c, _ := userdata.GetString(r.UserData, userdata.TypeComment)
		b.WriteString(c + "\n")
	}
	return b.String()
}
