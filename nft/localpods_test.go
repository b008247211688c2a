package nft

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

var (
	bridgeConfig = Config{ClusterCIDRs: testConfig.ClusterCIDRs, PodInterface: "cbr0"}
	prefixConfig = Config{ClusterCIDRs: testConfig.ClusterCIDRs, PodInterface: "veth", PodInterfacePrefix: true}
)

func TestValidatePodInterface(t *testing.T) {
	for _, tc := range []struct {
		name, wantErr string
		cfg           Config
	}{
		{name: "no pod interface detects by address", cfg: testConfig},
		{name: "a bridge name is valid", cfg: bridgeConfig},
		{name: "a prefix is valid", cfg: prefixConfig},
		{name: "a 15-byte name (the longest interface name) is valid", cfg: Config{PodInterface: "abcdefghijklmno"}},
		{name: "an empty prefix is refused, as kube-proxy", cfg: Config{PodInterfacePrefix: true},
			wantErr: "pod interface name prefix: must not be empty"},
		{name: "a name no interface can have is refused", cfg: Config{PodInterface: "abcdefghijklmnop"},
			wantErr: `pod bridge interface "abcdefghijklmnop": longer than 15 bytes, the longest interface name`},
		{name: "a prefix no interface can have is refused", cfg: Config{PodInterface: "abcdefghijklmnop", PodInterfacePrefix: true},
			wantErr: `pod interface name prefix "abcdefghijklmnop": longer than 15 bytes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Validate() = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// The rule count is the same in every mode: the interface match takes
// the address match's place, so the drift check's rule counts and the
// README's chain table hold for all of them.
func TestLocalPodModesKeepTheRuleCount(t *testing.T) {
	count := func(cfg Config) map[string]int {
		n := map[string]int{}
		for _, r := range ruleSpecs(cfg.withDefaults()) {
			n[r.chain]++
		}
		return n
	}
	want := count(testConfig)
	for _, cfg := range []Config{bridgeConfig, prefixConfig} {
		got := count(cfg)
		for _, d := range chainDefs {
			if got[d.name] != want[d.name] {
				t.Errorf("pod interface %q: chain %s has %d rules, want %d", cfg.PodInterface, d.name, got[d.name], want[d.name])
			}
		}
	}
}

// ifNameCmps finds the rules comparing an interface name, by what they
// load it with, and returns the compared data.
func ifNameCmps(cfg Config) map[string][][]byte {
	out := map[string][][]byte{}
	for _, r := range ruleSpecs(cfg.withDefaults()) {
		for i, e := range r.exprs {
			var what string
			switch e := e.(type) {
			case *expr.Meta:
				what = metaKeyNames[e.Key]
			case *expr.Fib:
				if e.ResultOIFNAME {
					what = "fib oifname"
				}
			}
			if what == "iifname" || what == "oifname" || what == "fib oifname" {
				c := r.exprs[i+1].(*expr.Cmp)
				out[r.chain+" "+what] = append(out[r.chain+" "+what], c.Data)
			}
		}
	}
	return out
}

// A bridge name is compared whole, NUL-padded to IFNAMSIZ as nft
// encodes "cbr0" (so "cbr01" is another interface); a prefix only by its
// own bytes, as nft encodes "veth*".
func TestPodInterfaceEncoding(t *testing.T) {
	whole := append([]byte("cbr0"), make([]byte, 12)...)
	for _, tc := range []struct {
		name string
		cfg  Config
		want map[string]int // chain and load -> rules
		data []byte
	}{
		{name: "by address no rule reads an interface", cfg: testConfig, want: map[string]int{}},
		{name: "bridge name compared whole", cfg: bridgeConfig, data: whole, want: map[string]int{
			"raw-prerouting iifname": 4, "raw-prerouting fib oifname": 2, "raw-output oifname": 2,
			"nat-prerouting iifname": 4, "nat-output iifname": 2}},
		{name: "prefix compared by its bytes", cfg: prefixConfig, data: []byte("veth"), want: map[string]int{
			"raw-prerouting iifname": 4, "raw-prerouting fib oifname": 2, "raw-output oifname": 2,
			"nat-prerouting iifname": 4, "nat-output iifname": 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ifNameCmps(tc.cfg)
			if len(got) != len(tc.want) {
				t.Errorf("interface matches in %d chain/load pairs %v, want %d", len(got), got, len(tc.want))
			}
			for k, n := range tc.want {
				if len(got[k]) != n {
					t.Errorf("%s: %d rules, want %d", k, len(got[k]), n)
				}
				for _, d := range got[k] {
					if !bytes.Equal(d, tc.data) {
						t.Errorf("%s compares %q, want %q", k, d, tc.data)
					}
				}
			}
		})
	}
}

// The kernel refuses fib's output interface in the output hook (the
// route is chosen there: meta oifname reads it); the fake does too, so
// that a rule put in the wrong chain fails in unit tests.
func TestFakeRefusesFibOifnameInOutput(t *testing.T) {
	f := NewFake()
	tab := f.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: TableName})
	for _, tc := range []struct {
		hook *nftables.ChainHook
		want error
	}{
		{nftables.ChainHookPrerouting, nil},
		{nftables.ChainHookOutput, unix.EOPNOTSUPP},
	} {
		ch := f.AddChain(&nftables.Chain{Name: "c", Table: tab, Type: nftables.ChainTypeFilter, Hooknum: tc.hook, Priority: nftables.ChainPriorityRaw})
		f.AddRule(&nftables.Rule{Table: tab, Chain: ch, Exprs: []expr.Any{
			&expr.Fib{Register: unix.NFT_REG_1, FlagDADDR: true, ResultOIFNAME: true},
			&expr.Cmp{Op: expr.CmpOpEq, Register: unix.NFT_REG_1, Data: []byte("veth")}}})
		if err := f.Flush(); !errors.Is(err, tc.want) {
			t.Errorf("hook %d: Flush() = %v, want %v", *tc.hook, err, tc.want)
		}
		f.DelTable(tab)
		_ = f.Flush()
		tab = f.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: TableName})
	}
}

// A writer in an interface mode programs the fake, whose kernel checks
// (fib oifname only where routing has not run) the rules pass.
func TestResyncInInterfaceModes(t *testing.T) {
	for _, cfg := range []Config{bridgeConfig, prefixConfig} {
		if err := New(cfg, NewFake()).Resync(fullPlan()); err != nil {
			t.Errorf("pod interface %q: Resync: %v", cfg.PodInterface, err)
		}
	}
}
