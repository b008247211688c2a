package nft

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
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
