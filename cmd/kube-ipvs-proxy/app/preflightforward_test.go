package app

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
)

// fakeForward is a node's FORWARD policies as ForwardReader reads them.
type fakeForward struct {
	drops     []nft.ForwardDrop
	nftErr    error
	legacy    map[bool]string // by v6
	legacyErr error
}

func (f fakeForward) NFTForwardDrops() ([]nft.ForwardDrop, error) { return f.drops, f.nftErr }
func (f fakeForward) LegacyForwardPolicy(v6 bool) (string, error) { return f.legacy[v6], f.legacyErr }

// TestForwardFindingsRules: what the preflight says of each FORWARD
// that drops by policy, and of one it cannot read.
func TestForwardFindingsRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		fwd  fakeForward
		want []string // "severity: message part", one per finding, in order
	}{
		{name: "nothing drops", fwd: fakeForward{legacy: map[bool]string{false: "ACCEPT"}},
			want: []string{"info: iptables-legacy filter FORWARD policy ACCEPT"}},
		{name: "no table at all", fwd: fakeForward{},
			want: []string{"info: no forward chain drops by policy"}},
		{name: "iptables-nft's FORWARD of policy drop gets the proxy's accept rule",
			fwd:  fakeForward{drops: []nft.ForwardDrop{{Chain: "ip filter FORWARD", Priority: 0, Accepted: true}}},
			want: []string{"info: ip filter FORWARD drops by policy: the proxy keeps a rule at its head accepting forwarded service traffic (mark 0x4000)"}},
		{name: "a chain dropping before filter-forward is a warning naming its priority",
			fwd:  fakeForward{drops: []nft.ForwardDrop{{Chain: "inet early forward", Priority: -310}}},
			want: []string{"warning: inet early forward drops by policy at priority -310, before the proxy's filter-forward"}},
		{name: "iptables-legacy's FORWARD of policy DROP is a warning with the rule to add, per family",
			fwd: fakeForward{legacy: map[bool]string{false: "DROP", true: "DROP"}},
			want: []string{"warning: iptables-legacy filter FORWARD policy DROP: the proxy cannot keep its accept rule in x_tables",
				"warning: ip6tables-legacy filter FORWARD policy DROP"}},
		{name: "what cannot be read is a warning saying to run as root",
			fwd: fakeForward{nftErr: errors.New("operation not permitted"), legacyErr: errors.New("operation not permitted")},
			want: []string{"warning: cannot read the nftables forward chains (run the preflight as root)",
				"warning: cannot read iptables-legacy's filter table", "warning: cannot read ip6tables-legacy's filter table"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := forwardFindings(tc.fwd, 0x4000)
			if len(got) != len(tc.want) {
				t.Fatalf("%d findings, want %d: %v", len(got), len(tc.want), got)
			}
			for i, f := range got {
				line := f.sev.String() + ": " + f.message
				if f.group != groupNode || f.subject != "FORWARD" || !strings.HasPrefix(line, tc.want[i]) {
					t.Errorf("finding %d = %s %s %q, want node FORWARD %q…", i, f.group, f.subject, line, tc.want[i])
				}
			}
			if tc.name == "iptables-legacy's FORWARD of policy DROP is a warning with the rule to add, per family" &&
				!strings.Contains(got[0].message, "iptables-legacy -I FORWARD -m mark --mark 0x4000/0x4000") {
				t.Errorf("the legacy finding does not give the rule: %s", got[0].message)
			}
		})
	}
}

// TestPreflightReportsForwardOnTheNodeOnly: the FORWARD findings are
// the node's, so they are made, as the kernel's, only where the
// preflight runs on the Node it plans.
func TestPreflightReportsForwardOnTheNodeOnly(t *testing.T) {
	if code, out := runPreflightOn(t, cleanCluster(), goodNode); code != ExitOK || !strings.Contains(out, "info    FORWARD: no forward chain drops by policy") {
		t.Errorf("on the node: exit %d, report:\n%s", code, out)
	}
	if _, out := runPreflightOn(t, cleanCluster(), without(goodNode, "sys/module/ip_vs")); !strings.Contains(out, "FORWARD:") {
		t.Errorf("on the node without ip_vs: no FORWARD finding:\n%s", out)
	}
	if _, out := runPreflightOn(t, cleanCluster(), fstest.MapFS{}); strings.Contains(out, "FORWARD:") {
		t.Errorf("off the node: a FORWARD finding:\n%s", out)
	}
}
