package nft

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// systemNft is the nft binary of the distributions the deploy README
// names: Debian 12's 1.0.6 parses rules back more strictly than newer
// releases, so it is what an operator's "nft list ruleset" runs.
const systemNft = "/usr/sbin/nft"

// TestSystemNftListsTheWrittenTable: with the full table our writer
// renders loaded (every rule, and services in every set), the system's
// nft lists the ruleset and the table without failing, as operators and
// other tools on the node run it, and prints each chain's rules as
// Render does.
func TestSystemNftListsTheWrittenTable(t *testing.T) {
	if _, err := os.Stat(systemNft); err != nil {
		t.Skipf("no %s here: %v", systemNft, err)
	}
	plan := variedServices(20)
	ns := newTestNetns(t)
	var listed string
	inNetns(t, ns, func() {
		w, err := NewLinux(testConfig)
		if err != nil {
			t.Error(err)
			return
		}
		if err := w.Resync(plan); err != nil {
			t.Errorf("Resync: %v", err)
			return
		}
		// The child inherits this locked thread's network namespace.
		for _, args := range [][]string{{"list", "ruleset"}, {"list", "table", "inet", w.table.Name}} {
			out, err := exec.Command(systemNft, args...).CombinedOutput()
			if err != nil {
				t.Errorf("%s %v: %v\n%s", systemNft, args, err, out)
			}
			listed = string(out)
		}
	})
	if t.Failed() {
		return
	}
	want, got := chainRules(Render(testConfig, plan)), chainRules(listed)
	for chain, rules := range want {
		if !slices.Equal(got[chain], rules) {
			t.Errorf("chain %s: nft lists\n\t%s\nRender has\n\t%s", chain,
				strings.Join(got[chain], "\n\t"), strings.Join(rules, "\n\t"))
		}
	}
}

// chainRules returns the rule lines of each chain of an nft listing.
func chainRules(listing string) map[string][]string {
	out := map[string][]string{}
	chain := ""
	for _, line := range strings.Split(listing, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "chain ") && strings.HasSuffix(line, " {"):
			chain = strings.TrimSuffix(strings.TrimPrefix(line, "chain "), " {")
			out[chain] = []string{}
		case line == "}":
			chain = ""
		case chain != "" && line != "" && !strings.HasPrefix(line, "type "):
			out[chain] = append(out[chain], line)
		}
	}
	return out
}

// TestRulesReadBackAsWritten: every rule of the written table reads back
// through NewRuleReader with the expressions we wrote (ct mark sets and
// anonymous sets included), as the read-back tests of the VM lab compare
// it with the fake.
func TestRulesReadBackAsWritten(t *testing.T) {
	ns := newTestNetns(t)
	got := map[string][]string{}
	inNetns(t, ns, func() {
		w, err := NewLinux(testConfig)
		if err != nil {
			t.Error(err)
			return
		}
		if err := w.Resync(variedServices(3)); err != nil {
			t.Errorf("Resync: %v", err)
			return
		}
		rr, err := NewRuleReader()
		if err != nil {
			t.Error(err)
			return
		}
		for _, d := range chainDefs {
			rules, err := rr.GetRules(w.table, &nftables.Chain{Name: d.name, Table: w.table})
			if err != nil {
				t.Errorf("rules of %s: %v", d.name, err)
				return
			}
			for _, r := range rules {
				got[d.name] = append(got[d.name], formatRule(r.Exprs))
			}
		}
	})
	if t.Failed() {
		return
	}
	want := map[string][]string{}
	for _, r := range ruleSpecs(testConfig.withDefaults()) {
		want[r.chain] = append(want[r.chain], formatRule(r.exprs))
	}
	for _, d := range chainDefs {
		if !slices.Equal(got[d.name], want[d.name]) {
			t.Errorf("chain %s reads back as\n\t%s\nwritten\n\t%s", d.name,
				strings.Join(got[d.name], "\n\t"), strings.Join(want[d.name], "\n\t"))
		}
	}
}

// formatRule prints a rule's expressions as the fake's Dump does, with
// anonymous sets by one name (the kernel numbers them).
func formatRule(exprs []expr.Any) string {
	var b strings.Builder
	for _, e := range exprs {
		b.WriteString("[ " + formatExpr(&fakeTable{}, e) + " ] ")
	}
	return anonSetNumber.ReplaceAllString(b.String(), "__set")
}

var anonSetNumber = regexp.MustCompile(`__set(%d|[0-9]+)`)
