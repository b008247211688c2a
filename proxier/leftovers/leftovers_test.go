package leftovers

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// fakeTables is a ruleset: chains with rules that jump to other chains.
// Flush applies the batch as the kernel does, refusing (EBUSY) to delete
// a chain that a remaining rule still jumps to.
type fakeTables struct {
	chains  []*nftables.Chain
	rules   map[*nftables.Chain][]*nftables.Rule
	listErr map[nftables.TableFamily]error
	delRule []*nftables.Rule
	flush   []*nftables.Chain
	del     []*nftables.Chain
	batches int
}

func newFake() *fakeTables { return &fakeTables{rules: map[*nftables.Chain][]*nftables.Rule{}} }

// chain adds family/table/name with rules jumping to the targets ("" is a
// rule without a jump).
func (f *fakeTables) chain(fam nftables.TableFamily, table, name string, jumps ...string) {
	c := &nftables.Chain{Name: name, Table: &nftables.Table{Name: table, Family: fam}}
	f.chains = append(f.chains, c)
	for i, j := range jumps {
		r := &nftables.Rule{Table: c.Table, Chain: c, Handle: uint64(i + 1)}
		if j != "" {
			r.Exprs = []expr.Any{&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictJump, Chain: j}}
		}
		f.rules[c] = append(f.rules[c], r)
	}
}

func (f *fakeTables) ListChainsOfTableFamily(fam nftables.TableFamily) ([]*nftables.Chain, error) {
	if err := f.listErr[fam]; err != nil {
		return nil, err
	}
	var out []*nftables.Chain
	for _, c := range f.chains {
		if c.Table.Family == fam {
			out = append(out, c)
		}
	}
	return out, nil
}

func (f *fakeTables) GetRules(_ *nftables.Table, c *nftables.Chain) ([]*nftables.Rule, error) {
	return f.rules[c], nil
}
func (f *fakeTables) DelRule(r *nftables.Rule) error { f.delRule = append(f.delRule, r); return nil }
func (f *fakeTables) FlushChain(c *nftables.Chain)   { f.flush = append(f.flush, c) }
func (f *fakeTables) DelChain(c *nftables.Chain)     { f.del = append(f.del, c) }

func (f *fakeTables) Flush() error {
	f.batches++
	defer func() { f.delRule, f.flush, f.del = nil, nil, nil }()
	for _, r := range f.delRule {
		f.rules[r.Chain] = slices.DeleteFunc(f.rules[r.Chain], func(x *nftables.Rule) bool { return x == r })
	}
	for _, c := range f.flush {
		f.rules[c] = nil
	}
	for _, c := range f.del {
		for from, rs := range f.rules {
			for _, r := range rs {
				if from.Table.Family == c.Table.Family && from.Table.Name == c.Table.Name && jumpTarget(r) == c.Name {
					return fmt.Errorf("delete chain %s: %w", c.Name, unix.EBUSY)
				}
			}
		}
		f.chains = slices.DeleteFunc(f.chains, func(x *nftables.Chain) bool { return x == c })
	}
	return nil
}

// names lists the chains left as "family table name".
func (f *fakeTables) names() string {
	var out []string
	for _, c := range f.chains {
		fam := "ip"
		if c.Table.Family == nftables.TableFamilyIPv6 {
			fam = "ip6"
		}
		out = append(out, fam+" "+c.Table.Name+" "+c.Name+fmt.Sprintf("(%d)", len(f.rules[c])))
	}
	return strings.Join(out, ", ")
}

// fakeIPSets holds ipsets; inUse ones refuse to go.
type fakeIPSets struct {
	loaded bool
	sets   map[string]bool // name → in use
	// heldFor: how many more Destroy calls find the set in use, as while
	// the kernel has yet to release a deleted rule's reference.
	heldFor map[string]int
}

func (s *fakeIPSets) Loaded() bool { return s.loaded }
func (s *fakeIPSets) Destroy(name string) error {
	inUse, ok := s.sets[name]
	if s.heldFor[name] > 0 {
		s.heldFor[name]--
		inUse = true
	}
	switch {
	case !ok:
		return ErrNotFound
	case inUse:
		return ErrInUse
	}
	delete(s.sets, name)
	return nil
}

const v4, v6 = nftables.TableFamilyIPv4, nftables.TableFamilyIPv6

var errLegacyRefused = errors.New("iptables-legacy table ip filter: not changed: refused")

// fakeLegacy is iptables-legacy's tables: RemoveLegacyChains removes
// what removes says, once, and so frees the ipsets its rules held.
type fakeLegacy struct {
	tables  []string
	removes []LegacyRemoval
	frees   []string
	err     error
	sets    *fakeIPSets
}

func (x *fakeLegacy) LegacyTables() []string { return x.tables }
func (x *fakeLegacy) RemoveLegacyChains() ([]LegacyRemoval, error) {
	out := x.removes
	x.removes = nil
	for _, n := range x.frees {
		if _, ok := x.sets.sets[n]; ok {
			x.sets.sets[n] = false
		}
	}
	return out, x.err
}

func TestRemoveTakesKubeProxysChainsAndIPSetsOnly(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		build                 func(f *fakeTables)
		sets                  map[string]bool
		loaded                bool
		legacy                []string
		legacyRemoves         []LegacyRemoval
		legacyFrees           []string
		legacyErr             error
		wantLeft              string
		wantSets              map[string]bool
		wantStuck, wantLegacy []string
		wantErr               string
	}{
		{
			name: "kube-proxy's chains and every jump to them go; the kubelet's and a CNI's stay",
			build: func(f *fakeTables) {
				f.chain(v4, "nat", "PREROUTING", "KUBE-SERVICES", "CNI-FOO")
				f.chain(v4, "nat", "POSTROUTING", "KUBE-POSTROUTING", "")
				f.chain(v4, "nat", "KUBE-SERVICES", "KUBE-NODE-PORT", "")
				f.chain(v4, "nat", "KUBE-NODE-PORT", "")
				f.chain(v4, "nat", "KUBE-POSTROUTING", "")
				f.chain(v4, "nat", "CNI-FOO", "")
				f.chain(v4, "filter", "INPUT", "KUBE-FIREWALL", "KUBE-IPVS-FILTER")
				f.chain(v4, "filter", "KUBE-FIREWALL", "")
				f.chain(v4, "filter", "KUBE-IPVS-FILTER", "")
				f.chain(v6, "nat", "PREROUTING", "KUBE-SERVICES")
				f.chain(v6, "nat", "KUBE-SERVICES", "")
			},
			loaded:   true,
			sets:     map[string]bool{"KUBE-CLUSTER-IP": false, "KUBE-6-CLUSTER-IP": false, "KUBE-6-LOAD-BALANCER-SOURCE-CID": false, "cni": false},
			wantLeft: "ip nat PREROUTING(1), ip nat POSTROUTING(1), ip nat CNI-FOO(1), ip filter INPUT(1), ip filter KUBE-FIREWALL(1), ip6 nat PREROUTING(0)",
			wantSets: map[string]bool{"cni": false},
		},
		{
			name: "a rule of anyone's jumping to a kube-proxy chain goes with the chain",
			build: func(f *fakeTables) {
				f.chain(v4, "filter", "FORWARD", "KUBE-FORWARD")
				f.chain(v4, "filter", "MY-CHAIN", "KUBE-FORWARD", "")
				f.chain(v4, "filter", "KUBE-FORWARD", "")
			},
			wantLeft: "ip filter FORWARD(0), ip filter MY-CHAIN(1)",
		},
		{
			name:     "a chain of kube-proxy's name in another table is not kube-proxy's",
			build:    func(f *fakeTables) { f.chain(v4, "raw", "KUBE-SERVICES", "") },
			wantLeft: "ip raw KUBE-SERVICES(1)",
		},
		{
			name:       "an ipset held by an iptables-legacy rule that stays is stuck and the legacy tables are named",
			build:      func(f *fakeTables) {},
			loaded:     true,
			sets:       map[string]bool{"KUBE-IPVS-IPS": true, "KUBE-CLUSTER-IP": false},
			legacy:     []string{"ip filter"},
			wantSets:   map[string]bool{"KUBE-IPVS-IPS": true},
			wantStuck:  []string{"KUBE-IPVS-IPS"},
			wantLegacy: []string{"ip filter"},
		},
		{
			name:          "kube-proxy's iptables-legacy chains go first, so the ipsets they held are destroyed",
			build:         func(f *fakeTables) {},
			loaded:        true,
			sets:          map[string]bool{"KUBE-IPVS-IPS": true, "KUBE-CLUSTER-IP": true},
			legacy:        []string{"ip filter", "ip nat"},
			legacyRemoves: []LegacyRemoval{{Table: "ip filter", Chains: []string{"KUBE-IPVS-FILTER"}}, {Table: "ip nat", Chains: []string{"KUBE-SERVICES"}}},
			legacyFrees:   []string{"KUBE-IPVS-IPS", "KUBE-CLUSTER-IP"},
			wantSets:      map[string]bool{},
		},
		{
			name:       "a legacy table that cannot be changed: the error, its ipsets stuck, the rest done",
			build:      func(f *fakeTables) { f.chain(v4, "nat", "KUBE-SERVICES", "") },
			loaded:     true,
			sets:       map[string]bool{"KUBE-IPVS-IPS": true, "KUBE-CLUSTER-IP": false},
			legacy:     []string{"ip filter"},
			legacyErr:  errLegacyRefused,
			wantErr:    "refused",
			wantSets:   map[string]bool{"KUBE-IPVS-IPS": true},
			wantStuck:  []string{"KUBE-IPVS-IPS"},
			wantLegacy: []string{"ip filter"},
		},
		{
			name:     "without ip_set loaded no ipset is asked for",
			build:    func(f *fakeTables) {},
			loaded:   false,
			sets:     map[string]bool{"KUBE-CLUSTER-IP": false},
			wantSets: map[string]bool{"KUBE-CLUSTER-IP": false},
		},
		{
			name: "a family that cannot be listed does not stop the other",
			build: func(f *fakeTables) {
				f.listErr = map[nftables.TableFamily]error{v4: unix.EPERM}
				f.chain(v6, "nat", "PREROUTING", "KUBE-SERVICES")
				f.chain(v6, "nat", "KUBE-SERVICES", "")
			},
			wantLeft: "ip6 nat PREROUTING(0)",
			wantErr:  "ip tables: list chains: operation not permitted",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			tc.build(f)
			s := &fakeIPSets{loaded: tc.loaded, sets: tc.sets}
			x := &fakeLegacy{tables: tc.legacy, removes: tc.legacyRemoves, frees: tc.legacyFrees, err: tc.legacyErr, sets: s}
			res, err := Remove(f, s, x)
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Remove err = %v; want %q", err, tc.wantErr)
			}
			if got := f.names(); got != tc.wantLeft {
				t.Errorf("chains left:\n got %s\nwant %s", got, tc.wantLeft)
			}
			if tc.wantSets == nil {
				tc.wantSets = tc.sets
			}
			if fmt.Sprint(s.sets) != fmt.Sprint(tc.wantSets) {
				t.Errorf("ipsets left %v; want %v", s.sets, tc.wantSets)
			}
			if !slices.Equal(res.Stuck, tc.wantStuck) || !slices.Equal(res.LegacyTables, tc.wantLegacy) {
				t.Errorf("stuck %v, legacy %v; want %v, %v", res.Stuck, res.LegacyTables, tc.wantStuck, tc.wantLegacy)
			}
			if !slices.EqualFunc(res.Legacy, tc.legacyRemoves, func(a, b LegacyRemoval) bool { return a.Table == b.Table }) {
				t.Errorf("legacy removals %v; want %v", res.Legacy, tc.legacyRemoves)
			}
			again, err := Remove(f, s, x)
			if !errors.Is(err, unix.EPERM) && !errors.Is(err, tc.legacyErr) && err != nil {
				t.Errorf("second Remove: %v", err)
			}
			if len(again.Chains)+len(again.Rules)+len(again.IPSets)+len(again.Legacy) > 0 {
				t.Errorf("second Remove did %+v; want nothing", again)
			}
		})
	}
}

// TestKubeProxyServesOnlyWithItsNATChainsFilled: kube-proxy serves a
// family once its nat KUBE-SERVICES and KUBE-POSTROUTING hold rules, as
// after the iptables-restore that ends its first sync; the chains empty,
// as its first sync creates them well before, are not enough.
func TestKubeProxyServesOnlyWithItsNATChainsFilled(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(f *fakeTables)
		want  bool
	}{
		{"nothing", func(f *fakeTables) {}, false},
		{"the kubelet's chains only", func(f *fakeTables) { f.chain(v4, "filter", "KUBE-FIREWALL", "") }, false},
		{"KUBE-SERVICES without its masquerade", func(f *fakeTables) { f.chain(v4, "nat", "KUBE-SERVICES", "") }, false},
		{"both, empty (created, the sync's restore not written yet)", func(f *fakeTables) {
			f.chain(v4, "nat", "KUBE-SERVICES")
			f.chain(v4, "nat", "KUBE-POSTROUTING")
		}, false},
		{"both, KUBE-POSTROUTING still empty", func(f *fakeTables) {
			f.chain(v4, "nat", "KUBE-SERVICES", "KUBE-NODE-PORT")
			f.chain(v4, "nat", "KUBE-POSTROUTING")
		}, false},
		{"both filled, in IPv4", func(f *fakeTables) {
			f.chain(v4, "nat", "KUBE-SERVICES", "KUBE-NODE-PORT")
			f.chain(v4, "nat", "KUBE-POSTROUTING", "")
		}, true},
		{"both filled, in IPv6", func(f *fakeTables) {
			f.chain(v6, "nat", "KUBE-SERVICES", "KUBE-NODE-PORT")
			f.chain(v6, "nat", "KUBE-POSTROUTING", "")
		}, true},
		{"filled in the filter table, not nat", func(f *fakeTables) {
			f.chain(v4, "filter", "KUBE-SERVICES", "")
			f.chain(v4, "filter", "KUBE-POSTROUTING", "")
		}, false},
		{"split across families", func(f *fakeTables) {
			f.chain(v4, "nat", "KUBE-SERVICES", "KUBE-NODE-PORT")
			f.chain(v6, "nat", "KUBE-POSTROUTING", "")
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			tc.build(f)
			if got, err := KubeProxyServes(f); err != nil || got != tc.want {
				t.Errorf("KubeProxyServes = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestRemoveWaitsForDeletedRulesToReleaseTheirIPSets: after deleting
// kube-proxy's rules, an ipset still in use is tried again for a while,
// since the kernel may release a deleted rule's reference after the
// transaction; one held by rules we did not delete (iptables-legacy's) is
// stuck, at once when we deleted no rule.
func TestRemoveWaitsForDeletedRulesToReleaseTheirIPSets(t *testing.T) {
	withRules := func(f *fakeTables) {
		f.chain(v4, "nat", "PREROUTING", "KUBE-SERVICES")
		f.chain(v4, "nat", "KUBE-SERVICES", "")
	}
	for _, tc := range []struct {
		name      string
		build     func(f *fakeTables)
		sets      map[string]bool
		heldFor   int
		wantStuck []string
		wantSleep time.Duration
	}{
		{"released after three tries: destroyed", withRules, map[string]bool{"KUBE-CLUSTER-IP": false}, 3, nil, 3 * refReleaseEvery},
		{"never released: stuck after the wait", withRules, map[string]bool{"KUBE-CLUSTER-IP": true}, 0, []string{"KUBE-CLUSTER-IP"}, refReleaseWait},
		{"no rule of ours deleted: stuck at once", func(*fakeTables) {}, map[string]bool{"KUBE-CLUSTER-IP": true}, 0, []string{"KUBE-CLUSTER-IP"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slept := time.Duration(0)
			sleep := func(d time.Duration) { slept += d }
			f := newFake()
			tc.build(f)
			s := &fakeIPSets{loaded: true, sets: tc.sets, heldFor: map[string]int{"KUBE-CLUSTER-IP": tc.heldFor}}
			res, err := remove(f, s, &fakeLegacy{sets: s}, sleep)
			if err != nil {
				t.Fatalf("remove: %v", err)
			}
			if !slices.Equal(res.Stuck, tc.wantStuck) {
				t.Errorf("stuck %v; want %v", res.Stuck, tc.wantStuck)
			}
			if tc.wantStuck == nil && !slices.Equal(res.IPSets, []string{"KUBE-CLUSTER-IP"}) {
				t.Errorf("destroyed %v; want [KUBE-CLUSTER-IP]", res.IPSets)
			}
			if slept != tc.wantSleep {
				t.Errorf("waited %v; want %v", slept, tc.wantSleep)
			}
		})
	}
}
