package nft

import (
	"os"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/golden"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

func TestRenderGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		plan policy.Plan
	}{
		{name: "full", cfg: testConfig, plan: fullPlan()},
		{name: "empty", cfg: Config{}, plan: policy.Plan{Node: "node-a"}},
		{name: "small", cfg: Config{ClusterCIDRs: testConfig.ClusterCIDRs[:1], MasqueradeBit: 15}, plan: smallPlan()},
		// detectLocalMode BridgeInterface and InterfaceNamePrefix: the same
		// rules, matching the input interface where "small" matches
		// @cluster-cidrs (and the output interface for replies to pods).
		{name: "bridge", cfg: Config{ClusterCIDRs: testConfig.ClusterCIDRs[:1], PodInterface: "cbr0"}, plan: smallPlan()},
		{name: "prefix", cfg: Config{PodInterface: "veth", PodInterfacePrefix: true}, plan: smallPlan()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			golden.Check(t, "testdata/render-"+tc.name+".golden", Render(tc.cfg, tc.plan))
		})
	}
}

func smallPlan() policy.Plan {
	return policy.Plan{Node: "node-a",
		VirtualServers: []policy.VirtualServer{vs("default/web", "10.96.0.10", 80, dest("10.244.1.5", 8080)), vs("default/empty", "10.96.0.50", 80)}}
}

// Every set and map of the full plan has elements, so the golden file
// shows each one's element syntax.
func TestRenderFullPlanFillsEverySet(t *testing.T) {
	out := Render(testConfig, fullPlan())
	for id := setID(0); int(id) < numSets(); id++ {
		i := strings.Index(out, " "+id.name()+" {")
		if i < 0 {
			t.Fatalf("set %s not rendered", id.name())
		}
		block := out[i:]
		block = block[:strings.Index(block, "\t}\n")]
		if !strings.Contains(block, "elements = {") {
			t.Errorf("set %s has no elements in the full plan", id.name())
		}
	}
}

func TestFormatRange(t *testing.T) {
	for _, tc := range []struct{ first, last, want string }{
		{"10.0.0.0", "10.255.255.255", "10.0.0.0/8"},
		{"10.0.0.1", "10.0.0.1", "10.0.0.1"},
		{"10.0.0.1", "10.0.0.2", "10.0.0.1-10.0.0.2"},
		{"0.0.0.0", "255.255.255.255", "0.0.0.0/0"},
		{"2001:db8::", "2001:db8::ffff", "2001:db8::/112"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if got := formatRange(addr(tc.first), addr(tc.last)); got != tc.want {
				t.Errorf("formatRange(%s, %s) = %s, want %s", tc.first, tc.last, got, tc.want)
			}
		})
	}
}

// README.md documents every chain and every set (a guard like
// knftables' objects_test.go).
func TestReadmeListsEveryObject(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, c := range chainDefs {
		if !strings.Contains(readme, "| `"+c.name+"` |") {
			t.Errorf("README.md has no table row for chain %s", c.name)
		}
	}
	for _, d := range setDefs {
		if !strings.Contains(readme, "| `"+d.base+"` |") {
			t.Errorf("README.md has no table row for set %s", d.base)
		}
	}
}
