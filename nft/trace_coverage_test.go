package nft_test

import (
	"os"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft/internal/packettrace"
)

// verdicts traces every case in both families. A trace that fails is
// recorded by its error.
func verdicts(t *testing.T, tr *packettrace.Tracer) map[string]string {
	t.Helper()
	out := map[string]string{}
	for fam := range 2 {
		for _, tc := range cases {
			key := famName(fam) + "/" + tc.name
			res, err := tc.trace(t, tr, fam)
			if err != nil {
				out[key] = "error: " + err.Error()
				continue
			}
			out[key] = res.Summary(nameOf) + " by " + res.By
		}
	}
	return out
}

// TestEveryRuleIsMatched proves the cases cover the table: every rule of
// every chain, as the fake holds them, is matched by at least one case.
func TestEveryRuleIsMatched(t *testing.T) {
	tr := newTracer(t)
	for key, v := range verdicts(t, tr) {
		if strings.HasPrefix(v, "error: ") {
			t.Fatalf("%s: %s", key, v)
		}
	}
	rules, uncovered := tr.Rules(), tr.Uncovered()
	for _, r := range uncovered {
		t.Errorf("rule %d of chain %s (%s) is matched by no case", r.Index, r.Chain, r)
	}
	t.Logf("%d of %d rules matched", len(rules)-len(uncovered), len(rules))
}

// TestEveryRuleDecidesAVerdict proves the cases check what the rules do,
// not only that they match: with any one rule made to never match (its
// family test kept, so the other rules keep their numbers), some case's
// verdict changes.
func TestEveryRuleDecidesAVerdict(t *testing.T) {
	tb := newTestbed(t)
	want := verdicts(t, newTracer(t))
	table := &nftables.Table{Family: nftables.TableFamilyINet, Name: nft.TableName}
	for _, ref := range newTracer(t).Rules() {
		rules, err := tb.tables.GetRules(table, &nftables.Chain{Name: ref.Chain, Table: table})
		if err != nil {
			t.Fatal(err)
		}
		never := append(familyTest(rules[ref.Index].Exprs), &expr.Verdict{Kind: expr.VerdictBreak})
		got := verdicts(t, editedTracer(t, editedTables{rules: map[string]map[int][]expr.Any{ref.Chain: {ref.Index: never}}}))
		changed := 0
		for key := range want {
			if got[key] != want[key] {
				changed++
			}
		}
		if changed == 0 {
			t.Errorf("rule %d of chain %s (%s): no case's verdict depends on it", ref.Index, ref.Chain, ref)
		}
	}
}

// familyTest returns a rule's "meta nfproto == x" test, if it has one.
func familyTest(exprs []expr.Any) []expr.Any {
	for i := 0; i+1 < len(exprs); i++ {
		if m, ok := exprs[i].(*expr.Meta); ok && m.Key == expr.MetaKeyNFPROTO && !m.SourceRegister {
			return []expr.Any{exprs[i], exprs[i+1]}
		}
	}
	return nil
}

// TestReadmeListsEveryCase keeps README.md's table of cases whole.
func TestReadmeListsEveryCase(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		if !strings.Contains(string(b), "| "+tc.name+" |") {
			t.Errorf("README.md does not list case %q", tc.name)
		}
	}
}
