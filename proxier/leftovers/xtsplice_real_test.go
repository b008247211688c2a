package leftovers

import (
	"bytes"
	"os"
	"testing"
)

// The testdata/*.xt files are tables as the kernel handed them out
// (ipt_getinfo's 84 bytes, then the entries), captured by
// TestCaptureXtBlobs from legacyRuleset: "before" with kube-proxy's,
// the kubelet's and foreign chains, "after" once iptables-legacy itself
// removed kube-proxy's chains and the rules jumping to them.

// readXtCapture splits a captured table into its info and entries.
func readXtCapture(t *testing.T, name string) (xtInfo, []byte) {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name + ".xt")
	if err != nil {
		t.Fatal(err)
	}
	info, err := parseXtInfo(b[:84])
	if err != nil {
		t.Fatal(err)
	}
	return info, b[84:]
}

// xtVolatile blanks what the kernel sets per entry and ignores when a
// table is written (counters, comefrom), so that blobs compare on what
// a splice decides.
func xtVolatile(blob []byte, info xtInfo, l xtEntryLayout) []byte {
	out := bytes.Clone(blob)
	entries, _ := xtEntries(blob, info, l)
	for _, e := range entries {
		clear(out[e.off+l.nextOffset+2 : e.off+l.nextOffset+6]) // comefrom
		clear(out[e.off+l.size-16 : e.off+l.size])              // xt_counters
	}
	return out
}

// TestSpliceXtTableWritesWhatIptablesLegacyWrites: spliced, each real
// table captured with kube-proxy's chains is, byte for byte (counters and
// comefrom aside, which the kernel resets), the table iptables-legacy
// writes once kube-proxy's chains and the jumps to them are removed with
// it; hook entries, underflows, entry count and size included.
func TestSpliceXtTableWritesWhatIptablesLegacyWrites(t *testing.T) {
	for _, tc := range []struct {
		name  string
		l     xtEntryLayout
		table string
	}{
		{"ip-nat", iptEntry, "nat"}, {"ip-filter", iptEntry, "filter"}, {"ip-mangle", iptEntry, "mangle"},
		{"ip6-nat", ip6tEntry, "nat"}, {"ip6-filter", ip6tEntry, "filter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info, blob := readXtCapture(t, tc.name+"-before")
			wantInfo, want := readXtCapture(t, tc.name+"-after")
			sp, err := spliceXtTable(blob, info, tc.l, kubeProxyChains[tc.table])
			if err != nil {
				t.Fatalf("spliceXtTable: %v", err)
			}
			t.Logf("cut %v and %v", sp.Chains, sp.Rules)
			if sp.Info != wantInfo {
				t.Errorf("info %+v; iptables-legacy's %+v", sp.Info, wantInfo)
			}
			if got, want := xtVolatile(sp.Blob, sp.Info, tc.l), xtVolatile(want, wantInfo, tc.l); !bytes.Equal(got, want) {
				gl, _ := xtListing(sp.Blob, sp.Info, tc.l)
				wl, _ := xtListing(want, wantInfo, tc.l)
				t.Errorf("spliced blob differs from iptables-legacy's:\n got %s\nwant %s", gl, wl)
			}
			again, err := spliceXtTable(sp.Blob, sp.Info, tc.l, kubeProxyChains[tc.table])
			if err != nil || len(again.Chains) > 0 {
				t.Errorf("a second splice = %v, %v; want nothing to cut", again.Chains, err)
			}
		})
	}
}
