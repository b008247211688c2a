//go:build integration

package traffic

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// TestForwardPolicyDropKeepsConnectionsOpenAcrossTheTakeover: a
// connection through a NodePort to another node's host-network endpoint,
// opened while kube-proxy served the node (IPVS programmed, our table
// absent, and an accept of established forwarded packets standing in for
// kube-proxy's KUBE-FORWARD in a forward chain of policy drop, and a
// masquerade for its KUBE-POSTROUTING), keeps
// working once our table is written and the stand-in is gone: the
// client's next packet gives the connection the conntrack mark in
// filter-input, and the replies node-a forwards are then marked by
// filter-forward and accepted by our rule in that chain.
func TestForwardPolicyDropKeepsConnectionsOpenAcrossTheTakeover(t *testing.T) {
	filter := &nftables.Table{Family: nftables.TableFamilyINet, Name: "filter"}
	kubeProxyNAT := &nftables.Table{Family: nftables.TableFamilyINet, Name: "kube-proxy-stand-in"}
	dropTablesAtEnd(t, filter, kubeProxyNAT)
	l := newLab(t)
	nodeB := l.node("node-b")
	labnet.Echo{Name: "node-b", Lines: true}.Serve(t, nodeB.host.Host, podTCPPort, podUDPPort, "4", "6")
	s := service("hostnet-ingress", []string{"10.96.14.1", "fd00:96::14:1"}, nodePorts(30090, 30091))
	l.setService(s,
		policy.Endpoint{Address: nodeB.v4, Ready: true, Serving: true, Place: &policy.Place{NodeName: "node-b", Zone: nodeB.zone}},
		policy.Endpoint{Address: nodeB.v6, Ready: true, Serving: true, Place: &policy.Place{NodeName: "node-b", Zone: nodeB.zone}})
	// kube-proxy's node: IPVS serves the NodePort, no table of ours.
	l.resync()
	deleteTable(t, &nftables.Table{Family: nftables.TableFamilyINet, Name: nft.TableName})
	addMasquerade(t, kubeProxyNAT)
	addInetForwardDrop(t)
	standIn := addAcceptEstablished(t, filter)

	var sessions []*labnet.Session
	for _, addr := range []string{hostPort(l.root.v4, 30090), hostPort(l.root.v6, 30090)} {
		sess, err := labnet.Greet(l.client.Host, addr, l.timeout)
		if err != nil {
			t.Fatalf("before the takeover: %v", err)
		}
		t.Cleanup(func() { sess.Close() })
		echoLine(t, sess, "before", l.timeout)
		sessions = append(sessions, sess)
	}

	// The takeover: our table and our accept rule, then kube-proxy's
	// rules go (the swap deletes KUBE-FORWARD and its NAT chains).
	l.resync()
	deleteRule(t, standIn)
	deleteTable(t, kubeProxyNAT)
	for _, sess := range sessions {
		echoLine(t, sess, "after", l.timeout)
	}
}

// echoLine writes line on a Lines echo session and fails t unless it
// comes back within d.
func echoLine(t *testing.T, s *labnet.Session, line string, d time.Duration) {
	t.Helper()
	_ = s.SetDeadline(time.Now().Add(d))
	defer func() { _ = s.SetDeadline(time.Time{}) }()
	if _, err := fmt.Fprintf(s, "%s\n", line); err != nil {
		t.Fatalf("write %q on the connection to %s: %v", line, s.Name, err)
	}
	got, err := s.R.ReadString('\n')
	if err != nil {
		t.Fatalf("%q on the connection to %s: no answer: %v", line, s.Name, err)
	}
	if want := s.Name + " " + line + "\n"; got != want {
		t.Fatalf("%q on the connection to %s: answer %q, want %q", line, s.Name, got, want)
	}
}

// deleteTable deletes a table.
func deleteTable(t *testing.T, tb *nftables.Table) {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	c.DelTable(tb)
	if err := c.Flush(); err != nil {
		t.Fatalf("delete table %s: %v", tb.Name, err)
	}
}

// addMasquerade makes table tb with a postrouting NAT chain that
// masquerades every new connection, as kube-proxy masquerades a
// NodePort's (KUBE-POSTROUTING).
func addMasquerade(t *testing.T, tb *nftables.Table) {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	c.AddTable(tb)
	ch := c.AddChain(&nftables.Chain{Table: tb, Name: "postrouting", Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
	c.AddRule(&nftables.Rule{Table: tb, Chain: ch, Exprs: []expr.Any{&expr.Masq{}}})
	if err := c.Flush(); err != nil {
		t.Fatalf("add the stand-in for kube-proxy's masquerade: %v", err)
	}
}

// standInComment marks the stand-in for kube-proxy's KUBE-FORWARD.
const standInComment = "test: kube-proxy's KUBE-FORWARD accept of established traffic"

// addAcceptEstablished appends "ct state established,related accept"
// to tb's forward chain, as kube-proxy's KUBE-FORWARD accepts them, and
// returns it with its handle.
func addAcceptEstablished(t *testing.T, tb *nftables.Table) *nftables.Rule {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	ch := &nftables.Chain{Table: tb, Name: "forward"}
	c.AddRule(&nftables.Rule{Table: tb, Chain: ch, Exprs: []expr.Any{
		&expr.Ct{Key: expr.CtKeySTATE, Register: unix.NFT_REG_1},
		&expr.Bitwise{SourceRegister: unix.NFT_REG_1, DestRegister: unix.NFT_REG_1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED),
			Xor:  binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: unix.NFT_REG_1, Data: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Verdict{Kind: expr.VerdictAccept},
	}, UserData: userdata.AppendString(nil, userdata.TypeComment, standInComment)})
	if err := c.Flush(); err != nil {
		t.Fatalf("add the stand-in for KUBE-FORWARD: %v", err)
	}
	rules, err := c.GetRules(tb, ch)
	if err != nil {
		t.Fatalf("rules of %s forward: %v", tb.Name, err)
	}
	for _, r := range rules {
		if cm, _ := userdata.GetString(r.UserData, userdata.TypeComment); strings.HasPrefix(cm, standInComment) {
			return r
		}
	}
	t.Fatalf("the stand-in for KUBE-FORWARD is not in %s forward", tb.Name)
	return nil
}

// deleteRule deletes a rule by its handle.
func deleteRule(t *testing.T, r *nftables.Rule) {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.DelRule(r); err != nil {
		t.Fatalf("delete rule: %v", err)
	}
	if err := c.Flush(); err != nil {
		t.Fatalf("delete rule %d: %v", r.Handle, err)
	}
}
