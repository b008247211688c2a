package leftovers

import (
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// xtChain is a chain of a test table: a built-in one on hook (with a
// policy), or a user one (hook -1). Its rules are targets: ACCEPT, DROP
// and RETURN are verdicts, "@next" a rule without a target (its verdict
// the next entry), "@NAME" a non-standard target NAME, "@bad" a verdict that
// is no entry's offset, "@mid:X" a jump to X's second entry, any other
// name a jump to that chain.
type xtChain struct {
	name   string
	hook   int
	rules  []string
	policy int32
}

// xtBuild lays a table out as the kernel hands it out: the built-in
// chains in hook order, each ending in its policy, then the user chains,
// each an ERROR head, its rules and a closing RETURN, then the table's
// ERROR end; jumps point at a chain's first entry after its head.
func xtBuild(l xtEntryLayout, chains []xtChain) ([]byte, xtInfo) {
	verdict := func(v int32) []byte { return binary.NativeEndian.AppendUint32(nil, uint32(v)) }
	ruleSize, headSize := len(rule(l)), len(chainHead(l, "X"))
	first := map[string]int{} // chain → offset of its first entry after the head
	off := 0
	for _, c := range chains {
		if c.hook < 0 {
			off += headSize
		}
		first[c.name] = off
		off += ruleSize * (len(c.rules) + 1)
	}
	var blob []byte
	var info xtInfo
	for _, c := range chains {
		if c.hook < 0 {
			blob = append(blob, chainHead(l, c.name)...)
		} else {
			info.ValidHooks |= 1 << c.hook
			info.HookEntry[c.hook] = uint32(len(blob))
		}
		for _, r := range c.rules {
			var v int32
			switch {
			case r == "ACCEPT":
				v = kernelAccept
			case r == "DROP":
				v = kernelDrop
			case r == "RETURN":
				v = xtVerdictReturn
			case r == "@next":
				v = int32(len(blob) + ruleSize)
			case r == "@bad":
				v = int32(len(blob) + 4)
			case strings.HasPrefix(r, "@mid:"):
				v = int32(first[r[5:]] + ruleSize)
			case strings.HasPrefix(r, "@"):
				blob = append(blob, xtEntry(l, r[1:], make([]byte, 4))...)
				continue
			default:
				v = int32(first[r])
			}
			blob = append(blob, xtEntry(l, xtStandardTarget, verdict(v))...)
		}
		end := int32(xtVerdictReturn)
		if c.hook >= 0 {
			info.Underflow[c.hook] = uint32(len(blob))
			end = c.policy
		}
		blob = append(blob, xtEntry(l, xtStandardTarget, verdict(end))...)
	}
	blob = append(blob, chainHead(l, xtErrorTarget)...)
	info.Size = uint32(len(blob))
	for o := 0; o < len(blob); o += int(binary.NativeEndian.Uint16(blob[o+l.nextOffset:])) {
		info.NumEntries++
	}
	return blob, info
}

// xtListing renders a table as "CHAIN: target, target; ...", reading
// jumps back to the chain whose first entry they point at ("@next" for a
// rule without a target), and checks that each hook's entry and
// underflow are its chain's first and policy entries: what a splice did,
// in words, whatever the offsets.
func xtListing(blob []byte, info xtInfo, l xtEntryLayout) (string, error) {
	entries, err := xtEntries(blob, info, l)
	if err != nil {
		return "", err
	}
	first := map[int]string{}
	for i, e := range entries {
		if e.head {
			first[entries[i+1].off] = e.chain
		}
	}
	for h := range xtNumHooks {
		if info.ValidHooks&(1<<h) != 0 {
			first[int(info.HookEntry[h])] = xtHookNames[h]
		}
	}
	var chains []string
	var cur []string
	for i, e := range entries {
		switch {
		case e.head || e.chain == "":
			continue
		case e.target != xtStandardTarget:
			cur = append(cur, "@"+e.target)
		case e.verdict >= 0 && int(e.verdict) == e.off+e.size:
			cur = append(cur, "@next")
		case e.verdict >= 0:
			name, ok := first[int(e.verdict)]
			if !ok {
				return "", fmt.Errorf("entry at %d jumps to %d, no chain's start", e.off, e.verdict)
			}
			cur = append(cur, name)
		default:
			cur = append(cur, map[int32]string{kernelAccept: "ACCEPT", kernelDrop: "DROP", xtVerdictReturn: "RETURN"}[e.verdict])
		}
		if i+1 == len(entries) || entries[i+1].chain != e.chain || entries[i+1].head {
			chains = append(chains, e.chain+": "+strings.Join(cur, ", "))
			cur = nil
		}
	}
	return strings.Join(chains, "; "), nil
}

var doomedNAT = kubeProxyChains["nat"]

// TestSpliceXtTableCutsKubeProxysChainsAndTheJumpsToThem: kube-proxy's
// chains go with every rule anywhere that jumps to one; everything else
// stays in order, every jump still reaching its chain, each hook still
// starting at its chain and ending at its policy, in both families'
// layouts; a table without kube-proxy's chains is left alone.
func TestSpliceXtTableCutsKubeProxysChainsAndTheJumpsToThem(t *testing.T) {
	pre := func(rules ...string) xtChain { return xtChain{"PREROUTING", 0, rules, kernelAccept} }
	post := func(rules ...string) xtChain { return xtChain{"POSTROUTING", 4, rules, kernelAccept} }
	user := func(name string, rules ...string) xtChain { return xtChain{name, -1, rules, 0} }
	for _, tc := range []struct {
		name       string
		chains     []xtChain
		want       string
		wantChains []string
		wantRules  []string
	}{
		{
			name: "jumps before, between and after foreign rules; foreign jumps still land",
			chains: []xtChain{pre("KUBE-SERVICES", "CNI", "ACCEPT"), post("@next", "KUBE-POSTROUTING", "CNI"),
				user("CNI", "@MARK", "KUBE-FIREWALL"), user("KUBE-FIREWALL", "DROP"),
				user("KUBE-MARK-MASQ", "@MARK"), user("KUBE-POSTROUTING", "@next", "RETURN"), user("KUBE-SERVICES", "KUBE-MARK-MASQ")},
			want:       "PREROUTING: CNI, ACCEPT, ACCEPT; POSTROUTING: @next, CNI, ACCEPT; CNI: @MARK, KUBE-FIREWALL, RETURN; KUBE-FIREWALL: DROP, RETURN",
			wantChains: []string{"KUBE-MARK-MASQ", "KUBE-POSTROUTING", "KUBE-SERVICES"},
			wantRules:  []string{"PREROUTING -> KUBE-SERVICES", "POSTROUTING -> KUBE-POSTROUTING"},
		},
		{
			name:   "a rule without a target before a cut rule falls through to the next that stays",
			chains: []xtChain{pre("@next", "KUBE-SERVICES", "DROP"), user("KUBE-SERVICES")},
			want:   "PREROUTING: @next, DROP, ACCEPT", wantChains: []string{"KUBE-SERVICES"},
			wantRules: []string{"PREROUTING -> KUBE-SERVICES"},
		},
		{
			name:       "the first rule of a hook cut: the hook starts at the next",
			chains:     []xtChain{pre("KUBE-SERVICES"), post("KUBE-POSTROUTING", "KUBE-POSTROUTING"), user("KUBE-POSTROUTING"), user("KUBE-SERVICES")},
			want:       "PREROUTING: ACCEPT; POSTROUTING: ACCEPT",
			wantChains: []string{"KUBE-POSTROUTING", "KUBE-SERVICES"},
			wantRules:  []string{"PREROUTING -> KUBE-SERVICES", "POSTROUTING -> KUBE-POSTROUTING", "POSTROUTING -> KUBE-POSTROUTING"},
		},
		{
			name:       "a foreign chain's jump to kube-proxy's goes; the kubelet's chains and canary stay",
			chains:     []xtChain{pre("MINE"), user("KUBE-KUBELET-CANARY"), user("KUBE-PROXY-CANARY"), user("MINE", "KUBE-LOAD-BALANCER", "KUBE-KUBELET-CANARY"), user("KUBE-LOAD-BALANCER", "MINE")},
			want:       "PREROUTING: MINE, ACCEPT; KUBE-KUBELET-CANARY: RETURN; MINE: KUBE-KUBELET-CANARY, RETURN",
			wantChains: []string{"KUBE-PROXY-CANARY", "KUBE-LOAD-BALANCER"},
			wantRules:  []string{"MINE -> KUBE-LOAD-BALANCER"},
		},
		{
			name:   "no chain of kube-proxy's: nothing to write",
			chains: []xtChain{pre("CNI"), user("CNI", "ACCEPT"), user("KUBE-FIREWALL")},
		},
	} {
		for _, l := range []xtEntryLayout{iptEntry, ip6tEntry} {
			t.Run(fmt.Sprintf("%s/header %d", tc.name, l.size), func(t *testing.T) {
				blob, info := xtBuild(l, tc.chains)
				sp, err := spliceXtTable(blob, info, l, doomedNAT)
				if err != nil {
					t.Fatalf("spliceXtTable: %v", err)
				}
				if !slices.Equal(sp.Chains, tc.wantChains) || !slices.Equal(sp.Rules, tc.wantRules) {
					t.Errorf("cut chains %q rules %q; want %q, %q", sp.Chains, sp.Rules, tc.wantChains, tc.wantRules)
				}
				if tc.wantChains == nil {
					if sp.Blob != nil {
						t.Errorf("a blob to write, with nothing cut")
					}
					return
				}
				got, err := xtListing(sp.Blob, sp.Info, l)
				if err != nil || got != tc.want {
					t.Errorf("after the splice:\n got %s (%v)\nwant %s", got, err, tc.want)
				}
				if len(sp.Kept) != int(sp.Info.NumEntries) {
					t.Errorf("%d entries kept, info says %d", len(sp.Kept), sp.Info.NumEntries)
				}
			})
		}
	}
}

// TestSpliceXtTableRefusesWhatItDoesNotUnderstand: a jump into the middle
// of a kube-proxy chain, a verdict that is no entry's offset, a blob
// that does not add up, and a hook's chain that does not end at its
// policy are refused, nothing to write.
func TestSpliceXtTableRefusesWhatItDoesNotUnderstand(t *testing.T) {
	pre := func(rules ...string) xtChain { return xtChain{"PREROUTING", 0, rules, kernelAccept} }
	user := func(name string, rules ...string) xtChain { return xtChain{name, -1, rules, 0} }
	kube := user("KUBE-SERVICES", "ACCEPT", "DROP")
	for _, tc := range []struct {
		name   string
		chains []xtChain
		mangle func(blob []byte, info *xtInfo) []byte
		want   string
	}{
		{"a jump into the middle of a kube-proxy chain", []xtChain{pre("@mid:KUBE-SERVICES"), kube}, nil, "jumps into the middle of KUBE-SERVICES"},
		{"a verdict that is no entry's offset", []xtChain{pre("@bad"), kube}, nil, "is not an entry's offset"},
		{"a non-standard target named as a kube-proxy chain", []xtChain{pre("@KUBE-SERVICES"), kube}, nil, "is not a jump"},
		{"info's size is not the blob's", []xtChain{pre(), kube}, func(b []byte, in *xtInfo) []byte { in.Size += 8; return b }, "info says"},
		{"info's count is not the blob's", []xtChain{pre(), kube}, func(b []byte, in *xtInfo) []byte { in.NumEntries--; return b }, "info says"},
		{"a truncated blob", []xtChain{pre(), kube}, func(b []byte, in *xtInfo) []byte { in.Size -= 8; return b[:len(b)-8] }, "malformed"},
		{"a policy entry that is not a policy", []xtChain{pre("@MARK"), kube}, func(b []byte, in *xtInfo) []byte { in.Underflow[0] = 0; return b }, "not a policy"},
		{"no table end", []xtChain{pre(), kube}, func(b []byte, in *xtInfo) []byte {
			n := len(chainHead(iptEntry, "X"))
			in.Size -= uint32(n)
			in.NumEntries--
			return b[:len(b)-n]
		}, "no ERROR entry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			blob, info := xtBuild(iptEntry, tc.chains)
			if tc.mangle != nil {
				blob = tc.mangle(blob, &info)
			}
			sp, err := spliceXtTable(blob, info, iptEntry, doomedNAT)
			if err == nil || !strings.Contains(err.Error(), tc.want) || sp.Blob != nil {
				t.Errorf("spliceXtTable = %d bytes, %v; want refused: %q", len(sp.Blob), err, tc.want)
			}
		})
	}
}

// FuzzSpliceXtTable feeds arbitrary blobs and infos, in both families'
// layouts, to the splicer whose output is written over a live table: it
// never panics, and what it would write reads back as a table with no
// chain of kube-proxy's and every jump on an entry, which a second splice
// leaves alone.
func FuzzSpliceXtTable(f *testing.F) {
	pre := xtChain{"PREROUTING", 0, []string{"@next", "KUBE-SERVICES", "CNI"}, kernelAccept}
	post := xtChain{"POSTROUTING", 4, []string{"KUBE-POSTROUTING"}, kernelDrop}
	for _, l := range []xtEntryLayout{iptEntry, ip6tEntry} {
		blob, info := xtBuild(l, []xtChain{pre, post, {"CNI", -1, []string{"@MARK", "KUBE-MARK-MASQ"}, 0},
			{"KUBE-MARK-MASQ", -1, []string{"@MARK"}, 0}, {"KUBE-POSTROUTING", -1, nil, 0}, {"KUBE-SERVICES", -1, []string{"KUBE-MARK-MASQ"}, 0}})
		f.Add(blob, xtInfoBytes(info), l == ip6tEntry)
	}
	for _, name := range []string{"ip-nat-before", "ip-filter-before", "ip6-nat-before"} {
		if b, err := os.ReadFile("testdata/" + name + ".xt"); err == nil {
			f.Add(b[84:], b[:84], strings.HasPrefix(name, "ip6"))
		}
	}
	f.Add([]byte{}, make([]byte, 84), false)
	f.Fuzz(func(t *testing.T, blob, rawInfo []byte, v6 bool) {
		l := iptEntry
		if v6 {
			l = ip6tEntry
		}
		info, err := parseXtInfo(rawInfo)
		if err != nil {
			return
		}
		sp, err := spliceXtTable(blob, info, l, doomedNAT)
		if err != nil || len(sp.Chains) == 0 {
			return
		}
		entries, err := xtEntries(sp.Blob, sp.Info, l)
		if err != nil {
			t.Fatalf("the splice does not read back: %v", err)
		}
		at := map[int]bool{}
		for _, e := range entries {
			at[e.off] = true
		}
		for _, e := range entries {
			if e.target == xtStandardTarget && e.verdict >= 0 && !at[int(e.verdict)] {
				t.Fatalf("entry at %d jumps to %d, no entry", e.off, e.verdict)
			}
		}
		again, err := spliceXtTable(sp.Blob, sp.Info, l, doomedNAT)
		if err != nil || len(again.Chains) > 0 {
			t.Fatalf("a second splice = %v, %v; want nothing to cut", again.Chains, err)
		}
	})
}

// xtInfoBytes is info as ipt_getinfo lays it out, for table "nat".
func xtInfoBytes(info xtInfo) []byte {
	b := make([]byte, 84)
	copy(b, "nat")
	binary.NativeEndian.PutUint32(b[xtInfoValidHooksOff:], info.ValidHooks)
	for h := range xtNumHooks {
		binary.NativeEndian.PutUint32(b[xtInfoValidHooksOff+4+4*h:], info.HookEntry[h])
		binary.NativeEndian.PutUint32(b[xtInfoUnderflowOff+4*h:], info.Underflow[h])
	}
	binary.NativeEndian.PutUint32(b[76:], info.NumEntries)
	binary.NativeEndian.PutUint32(b[80:], info.Size)
	return b
}

// TestLegacyDoomedKeepsKubeForwardOnlyWhereForwardDrops: KUBE-FORWARD,
// the accept of marked and established forwarded packets, stays in a
// filter table whose FORWARD policy is DROP; elsewhere, and in the other
// tables, every chain of kube-proxy's goes, and never the kubelet's.
func TestLegacyDoomedKeepsKubeForwardOnlyWhereForwardDrops(t *testing.T) {
	for _, tc := range []struct {
		table, policy string
		forward       bool
	}{{"filter", "DROP", false}, {"filter", "ACCEPT", true}, {"filter", "", true}, {"nat", "DROP", false}} {
		got := legacyDoomed(tc.table, tc.policy)
		if slices.Contains(got, "KUBE-FORWARD") != tc.forward {
			t.Errorf("legacyDoomed(%s, %q) = %v; KUBE-FORWARD cut: want %v", tc.table, tc.policy, got, tc.forward)
		}
		for _, c := range []string{"KUBE-FIREWALL", "KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT"} {
			if slices.Contains(got, c) {
				t.Errorf("legacyDoomed(%s, %q) cuts the kubelet's %s", tc.table, tc.policy, c)
			}
		}
	}
	if got := legacyDoomed("filter", "DROP"); len(got) != len(kubeProxyChains["filter"])-1 {
		t.Errorf("legacyDoomed(filter, DROP) = %v; want every other chain of kube-proxy's", got)
	}
}
