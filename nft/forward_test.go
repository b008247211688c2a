package nft

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// forwardChain is a base chain on the forward hook of table fam/name.
func forwardChain(fam nftables.TableFamily, table, name string, typ nftables.ChainType, prio nftables.ChainPriority, policy nftables.ChainPolicy) *nftables.Chain {
	return &nftables.Chain{Table: &nftables.Table{Family: fam, Name: table}, Name: name, Type: typ,
		Hooknum: nftables.ChainHookForward, Priority: &prio, Policy: &policy}
}

func commented(handle uint64, comment string) *nftables.Rule {
	return &nftables.Rule{Handle: handle, UserData: userdata.AppendString(nil, userdata.TypeComment, comment),
		Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}}}
}

// TestPlanForwardAcceptsKeepsOneRuleOfOursWhereAChainDrops proves the
// ownership rules of forward.go: our rule goes into, and stays in, each
// filter chain of policy drop after filter-forward; it leaves every
// other chain; rules of others are never touched.
func TestPlanForwardAcceptsKeepsOneRuleOfOursWhereAChainDrops(t *testing.T) {
	want := forwardComment(0x4000)
	docker := forwardChain(nftables.TableFamilyIPv4, "filter", "FORWARD", nftables.ChainTypeFilter, 0, nftables.ChainPolicyDrop)
	accepting := forwardChain(nftables.TableFamilyINet, "filter", "forward", nftables.ChainTypeFilter, 0, nftables.ChainPolicyAccept)
	early := forwardChain(nftables.TableFamilyINet, "early", "forward", nftables.ChainTypeFilter, -400, nftables.ChainPolicyDrop)
	nat := forwardChain(nftables.TableFamilyIPv4, "nat", "fwd", nftables.ChainTypeNAT, 0, nftables.ChainPolicyDrop)
	theirs := commented(7, "DOCKER-USER")
	tests := []struct {
		name   string
		chains []foreignChain
		want   []forwardOp
	}{
		{name: "a filter chain of policy drop without our rule gets it",
			chains: []foreignChain{{chain: docker, rules: []*nftables.Rule{theirs}}},
			want:   []forwardOp{{chain: docker, insert: true}}},
		{name: "our rule where it is needed stays, wherever it sits",
			chains: []foreignChain{{chain: docker, rules: []*nftables.Rule{theirs, commented(9, want)}}}},
		{name: "a duplicate of ours is deleted",
			chains: []foreignChain{{chain: docker, rules: []*nftables.Rule{commented(3, want), theirs, commented(9, want)}}},
			want:   []forwardOp{{chain: docker, handle: 9}}},
		{name: "ours with another mark is replaced",
			chains: []foreignChain{{chain: docker, rules: []*nftables.Rule{commented(3, forwardComment(0x8000))}}},
			want:   []forwardOp{{chain: docker, handle: 3}, {chain: docker, insert: true}}},
		{name: "a chain of policy accept loses ours and keeps the rest",
			chains: []foreignChain{{chain: accepting, rules: []*nftables.Rule{commented(3, want), theirs}}},
			want:   []forwardOp{{chain: accepting, handle: 3}}},
		{name: "a chain before filter-forward would not see the mark: nothing there",
			chains: []foreignChain{{chain: early}}},
		{name: "a chain of another type is not a filter: nothing there",
			chains: []foreignChain{{chain: nat}}},
		{name: "rules of others are never touched, whatever their comment",
			chains: []foreignChain{{chain: accepting, rules: []*nftables.Rule{theirs, commented(8, "kube-ipvs-proxy")}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := planForwardAccepts(tc.chains, want, needsForwardAccept)
			if !slices.Equal(got, tc.want) {
				t.Errorf("ops %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestResyncKeepsOurAcceptInForeignForwardChainsAndCleanupRemovesIt
// runs forward.go against the fake: Docker's iptables-nft FORWARD of
// policy drop and a firewalld-style inet filter forward chain get our
// rule at their head, their own rules kept; a second Resync changes
// nothing; Cleanup removes exactly ours.
func TestResyncKeepsOurAcceptInForeignForwardChainsAndCleanupRemovesIt(t *testing.T) {
	f := NewFake()
	docker := forwardChain(nftables.TableFamilyIPv4, "filter", "FORWARD", nftables.ChainTypeFilter, 0, nftables.ChainPolicyDrop)
	inet := forwardChain(nftables.TableFamilyINet, "filter", "forward", nftables.ChainTypeFilter, 0, nftables.ChainPolicyDrop)
	for _, c := range []*nftables.Chain{docker, inet} {
		f.AddTable(c.Table)
		f.AddChain(&nftables.Chain{Table: c.Table, Name: "x"})
		f.AddChain(c)
		f.AddRule(&nftables.Rule{Table: c.Table, Chain: c, Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: "x"}}})
	}
	if err := f.Flush(); err != nil {
		t.Fatal(err)
	}
	w := New(testConfig, f)
	if err := w.Resync(smallPlan()); err != nil {
		t.Fatal(err)
	}
	if st := w.LastResync().Forward; st.Inserted != 2 || st.Deleted != 0 || len(st.Chains) != 2 {
		t.Errorf("first Resync: %+v, want 2 inserted into 2 chains", st)
	}
	for _, c := range []*nftables.Chain{docker, inet} {
		rules, err := f.GetRules(c.Table, c)
		if err != nil {
			t.Fatal(err)
		}
		if len(rules) != 2 {
			t.Fatalf("chain %s: %d rules, want ours and theirs", chainText(c), len(rules))
		}
		if got, _ := userdata.GetString(rules[0].UserData, userdata.TypeComment); got != forwardComment(0x4000) {
			t.Errorf("chain %s: first rule's comment %q, want ours", chainText(c), got)
		}
		if v, ok := rules[1].Exprs[0].(*expr.Verdict); !ok || v.Chain != "x" {
			t.Errorf("chain %s: their rule changed: %v", chainText(c), rules[1].Exprs)
		}
	}
	if err := w.Resync(smallPlan()); err != nil {
		t.Fatal(err)
	}
	if st := w.LastResync().Forward; st.Inserted != 0 || st.Deleted != 0 {
		t.Errorf("second Resync changed rules: %+v", st)
	}
	if err := w.Cleanup(); err != nil {
		t.Fatal(err)
	}
	dump := f.Dump()
	if strings.Contains(dump, forwardCommentPrefix) || strings.Contains(dump, "table inet "+TableName) {
		t.Errorf("after Cleanup:\n%s", dump)
	}
	if n := strings.Count(dump, "[ immediate jump x ]"); n != 2 {
		t.Errorf("after Cleanup, %d of their 2 rules left:\n%s", n, dump)
	}
}

// TestForwardAcceptFailureIsReportedOnce: a chain we cannot change fails
// the first Resync that meets it, wrapping ErrForwardAccepts, and not the
// next ones; our table is programmed all along.
func TestForwardAcceptFailureIsReportedOnce(t *testing.T) {
	f := NewFake()
	w := New(testConfig, f)
	if err := w.Resync(smallPlan()); err != nil {
		t.Fatal(err)
	}
	docker := forwardChain(nftables.TableFamilyIPv4, "filter", "FORWARD", nftables.ChainTypeFilter, 0, nftables.ChainPolicyDrop)
	f.AddTable(docker.Table)
	f.AddChain(docker)
	if err := f.Flush(); err != nil {
		t.Fatal(err)
	}
	for i, wantErr := range []bool{true, false} {
		f.FailNextFlush(unix.EPERM) // a table whose owner refuses others
		err := w.Resync(smallPlan())
		if got := err != nil; got != wantErr {
			t.Errorf("Resync %d: error %v, want one: %t", i+1, err, wantErr)
		}
		if err != nil && !errors.Is(err, ErrForwardAccepts) {
			t.Errorf("Resync %d: %v does not wrap ErrForwardAccepts", i+1, err)
		}
		if w.NeedsResync() || w.LastResync().ForwardErr == "" {
			t.Errorf("Resync %d: needs resync %t, ForwardErr %q", i+1, w.NeedsResync(), w.LastResync().ForwardErr)
		}
	}
}
