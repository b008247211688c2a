package leftovers

import (
	"encoding/binary"
	"maps"
	"testing"

	"github.com/google/nftables"
)

// xtEntry builds one x_tables entry of layout l: a zero header (no
// match) and a target named name with data, as the kernel hands it out.
func xtEntry(l xtEntryLayout, name string, data []byte) []byte {
	data = append(data, make([]byte, (8-len(data)%8)%8)...)
	target := make([]byte, xtTargetDataOff, xtTargetDataOff+len(data))
	binary.NativeEndian.PutUint16(target, uint16(xtTargetDataOff+len(data)))
	copy(target[xtTargetNameOff:], name)
	target = append(target, data...)
	e := make([]byte, l.size, l.size+len(target))
	binary.NativeEndian.PutUint16(e[l.targetOffset:], uint16(l.size))
	binary.NativeEndian.PutUint16(e[l.nextOffset:], uint16(l.size+len(target)))
	return append(e, target...)
}

func rule(l xtEntryLayout) []byte { return xtEntry(l, "", make([]byte, 4)) } // a standard target
func chainHead(l xtEntryLayout, name string) []byte {
	return xtEntry(l, xtErrorTarget, append([]byte(name), make([]byte, 30-len(name))...))
}

// natTable is a nat table's blob: two built-in chains (a rule and a
// policy each), then user chains with n rules each (and their implicit
// RETURN), then the table's end.
func natTable(l xtEntryLayout, chains ...struct {
	name string
	n    int
}) []byte {
	var b []byte
	for range 2 {
		b = append(append(b, rule(l)...), rule(l)...)
	}
	for _, c := range chains {
		b = append(b, chainHead(l, c.name)...)
		for range c.n + 1 {
			b = append(b, rule(l)...)
		}
	}
	return append(b, chainHead(l, xtErrorTarget)...)
}

type chainRules = struct {
	name string
	n    int
}

// TestXtChainRulesCountsEachUserChainsRules reads chain names and rule
// counts from x_tables blobs laid out as the kernel hands them out, in
// both families' entry layouts; built-in chains are not counted, an
// empty chain has 0 rules, and a truncated or malformed blob is an error.
func TestXtChainRulesCountsEachUserChainsRules(t *testing.T) {
	chains := []chainRules{{"KUBE-SERVICES", 3}, {"KUBE-POSTROUTING", 0}, {"KUBE-MARK-MASQ", 1}}
	want := map[string]int{"KUBE-SERVICES": 3, "KUBE-POSTROUTING": 0, "KUBE-MARK-MASQ": 1}
	for _, tc := range []struct {
		name string
		l    xtEntryLayout
	}{{"IPv4 (ipt_entry)", iptEntry}, {"IPv6 (ip6t_entry)", ip6tEntry}} {
		t.Run(tc.name, func(t *testing.T) {
			blob := natTable(tc.l, chains...)
			got, err := xtChainRules(blob, tc.l)
			if err != nil || !maps.Equal(got, want) {
				t.Errorf("xtChainRules = %v, %v; want %v", got, err, want)
			}
			if _, err := xtChainRules(blob[:len(blob)-10], tc.l); err == nil {
				t.Errorf("a truncated blob read without error")
			}
			bad := append([]byte(nil), blob...)
			binary.NativeEndian.PutUint16(bad[tc.l.nextOffset:], 3)
			if _, err := xtChainRules(bad, tc.l); err == nil {
				t.Errorf("an entry whose next offset is inside its header read without error")
			}
		})
	}
	if got, err := xtChainRules(natTable(iptEntry), iptEntry); err != nil || len(got) != 0 {
		t.Errorf("built-in chains only: %v, %v; want no chain", got, err)
	}
}

// TestLegacyServesOnlyWithBothNATChainsFilled: as with iptables-nft,
// kube-proxy's legacy rules serve once its KUBE-SERVICES and
// KUBE-POSTROUTING both hold rules in one family.
func TestLegacyServesOnlyWithBothNATChainsFilled(t *testing.T) {
	for _, tc := range []struct {
		name   string
		v4, v6 map[string]int
		want   bool
	}{
		{"no legacy nat table", nil, nil, false},
		{"created, not filled yet", map[string]int{"KUBE-SERVICES": 0, "KUBE-POSTROUTING": 0}, nil, false},
		{"KUBE-POSTROUTING still empty", map[string]int{"KUBE-SERVICES": 4, "KUBE-POSTROUTING": 0}, nil, false},
		{"both filled in IPv4", map[string]int{"KUBE-SERVICES": 4, "KUBE-POSTROUTING": 2}, nil, true},
		{"both filled in IPv6", nil, map[string]int{"KUBE-SERVICES": 1, "KUBE-POSTROUTING": 1}, true},
		{"split across families", map[string]int{"KUBE-SERVICES": 4}, map[string]int{"KUBE-POSTROUTING": 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := legacyServes(func(v6 bool) (map[string]int, error) {
				if v6 {
					return tc.v6, nil
				}
				return tc.v4, nil
			})
			if err != nil || got != tc.want {
				t.Errorf("legacyServes = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestKubeProxyNFTablesServesOnceItsMasqueradingChainHoldsRules:
// kube-proxy's nftables mode writes its whole table in one transaction
// per sync; rules in its masquerading chain mean the first one is in.
func TestKubeProxyNFTablesServesOnceItsMasqueradingChainHoldsRules(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(f *fakeTables)
		want  bool
	}{
		{"nothing", func(f *fakeTables) {}, false},
		{"its table, masquerading empty", func(f *fakeTables) { f.chain(v4, "kube-proxy", "masquerading") }, false},
		{"masquerading filled, IPv4", func(f *fakeTables) { f.chain(v4, "kube-proxy", "masquerading", "", "") }, true},
		{"masquerading filled, IPv6", func(f *fakeTables) { f.chain(v6, "kube-proxy", "masquerading", "") }, true},
		{"another table's masquerading", func(f *fakeTables) { f.chain(v4, "other", "masquerading", "") }, false},
		{"its other chains only", func(f *fakeTables) { f.chain(v4, "kube-proxy", "services", "") }, false},
		{"in family inet, where kube-proxy never writes", func(f *fakeTables) {
			f.chain(nftables.TableFamilyINet, "kube-proxy", "masquerading", "")
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			tc.build(f)
			if got, err := KubeProxyNFTablesServes(f); err != nil || got != tc.want {
				t.Errorf("KubeProxyNFTablesServes = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// FuzzXtChainRules feeds arbitrary blobs, in both families' entry
// layouts, to the x_tables reader the handback runs on every node: it
// never panics, and what it reads has names and no negative count.
func FuzzXtChainRules(f *testing.F) {
	f.Add(natTable(iptEntry, chainRules{"KUBE-SERVICES", 2}, chainRules{"KUBE-POSTROUTING", 0}), false)
	f.Add(natTable(ip6tEntry, chainRules{"KUBE-SERVICES", 1}), true)
	f.Add(chainHead(iptEntry, "X")[:100], false)
	f.Add([]byte{}, true)
	f.Fuzz(func(t *testing.T, blob []byte, v6 bool) {
		l := iptEntry
		if v6 {
			l = ip6tEntry
		}
		chains, err := xtChainRules(blob, l)
		if err != nil {
			return
		}
		for name, n := range chains {
			if name == "" || n < 0 {
				t.Fatalf("chain %q with %d rules", name, n)
			}
		}
	})
}

// The kernel's policy verdicts, written out here so that the fixtures do
// not follow the constants they test: -NF_DROP-1 and -NF_ACCEPT-1.
const (
	kernelDrop   = -1
	kernelAccept = -2
)

// policyEntry is a built-in chain's policy entry: a standard target
// with verdict v.
func policyEntry(l xtEntryLayout, v int32) []byte {
	d := make([]byte, 4)
	binary.NativeEndian.PutUint32(d, uint32(v))
	return xtEntry(l, xtStandardTarget, d)
}

// filterTable is a filter table's blob and ipt_getinfo: INPUT, FORWARD
// and OUTPUT with a rule each and the given policies (FORWARD's left
// out when forward is 0), then the table's end.
func filterTable(l xtEntryLayout, forward int32) (blob, info []byte) {
	info = make([]byte, 84)
	var hooks uint32
	for _, c := range []struct {
		hook   int
		policy int32
	}{{1, kernelAccept}, {xtHookForward, forward}, {3, kernelAccept}} {
		if c.policy == 0 {
			continue
		}
		hooks |= 1 << c.hook
		blob = append(blob, rule(l)...)
		binary.NativeEndian.PutUint32(info[xtInfoUnderflowOff+4*c.hook:], uint32(len(blob)))
		blob = append(blob, policyEntry(l, c.policy)...)
	}
	binary.NativeEndian.PutUint32(info[xtInfoValidHooksOff:], hooks)
	return append(blob, chainHead(l, xtErrorTarget)...), info
}

// TestXtHookPolicyReadsTheForwardPolicy reads FORWARD's policy from
// filter tables laid out as the kernel hands them out, in both
// families' layouts: DROP and ACCEPT as iptables-legacy -S shows them,
// nothing for a table without the hook, and an error for a policy entry
// that is not one.
func TestXtHookPolicyReadsTheForwardPolicy(t *testing.T) {
	for _, l := range []xtEntryLayout{iptEntry, ip6tEntry} {
		for _, tc := range []struct {
			name    string
			forward int32
			want    string
		}{
			{"policy DROP", kernelDrop, "DROP"},
			{"policy ACCEPT", kernelAccept, "ACCEPT"},
			{"no FORWARD chain", 0, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				blob, info := filterTable(l, tc.forward)
				if got, err := xtHookPolicy(blob, info, xtHookForward, l); err != nil || got != tc.want {
					t.Errorf("xtHookPolicy = %q, %v; want %q", got, err, tc.want)
				}
			})
		}
		t.Run("a jump where the policy should be", func(t *testing.T) {
			blob, info := filterTable(l, 200)
			if got, err := xtHookPolicy(blob, info, xtHookForward, l); err == nil {
				t.Errorf("xtHookPolicy = %q, want an error", got)
			}
		})
		t.Run("an underflow past the blob", func(t *testing.T) {
			blob, info := filterTable(l, kernelDrop)
			binary.NativeEndian.PutUint32(info[xtInfoUnderflowOff+4*xtHookForward:], uint32(len(blob)))
			if got, err := xtHookPolicy(blob, info, xtHookForward, l); err == nil {
				t.Errorf("xtHookPolicy = %q, want an error", got)
			}
		})
	}
}
