package app

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
)

type fakeCleaner struct {
	removed proxier.Removed
	err     error
	dryRun  []bool
	calls   []string
}

func (f *fakeCleaner) Clean(dryRun bool) (proxier.Removed, error) {
	f.dryRun = append(f.dryRun, dryRun)
	f.calls = append(f.calls, "Clean")
	return f.removed, f.err
}

func (f *fakeCleaner) CleanTable(dryRun bool) (proxier.Removed, error) {
	f.dryRun = append(f.dryRun, dryRun)
	f.calls = append(f.calls, "CleanTable")
	return proxier.Removed{Table: f.removed.Table}, f.err
}

// TestCleanupLists: --cleanup lists on stderr what it removed, and with
// --dry-run what it would remove, and says so when there is nothing.
func TestCleanupLists(t *testing.T) {
	some := proxier.Removed{
		VirtualServers: []policy.VirtualServerKey{{Address: netip.MustParseAddr("10.96.0.10"), Protocol: policy.ProtocolTCP, Port: 80}},
		Interface:      "kube-ipvs0", Table: "inet kube-ipvs-proxy",
	}
	tests := []struct {
		name      string
		removed   proxier.Removed
		err       error
		dryRun    bool
		tableOnly bool
		wantCode  int
		want      string
	}{
		{name: "--cleanup-table-only removes only the table, leaving IPVS to kube-proxy", removed: some, tableOnly: true,
			wantCode: ExitOK, want: "kube-ipvs-proxy: cleanup: removed nftables table inet kube-ipvs-proxy\n"},
		{name: "removed objects are listed", removed: some, wantCode: ExitOK, want: `kube-ipvs-proxy: cleanup: removed ipvs virtual server 10.96.0.10:80/TCP
kube-ipvs-proxy: cleanup: removed interface kube-ipvs0
kube-ipvs-proxy: cleanup: removed nftables table inet kube-ipvs-proxy
`},
		{name: "a dry run lists what it would remove", removed: some, dryRun: true, wantCode: ExitOK, want: `kube-ipvs-proxy: cleanup: would remove ipvs virtual server 10.96.0.10:80/TCP
kube-ipvs-proxy: cleanup: would remove interface kube-ipvs0
kube-ipvs-proxy: cleanup: would remove nftables table inet kube-ipvs-proxy
kube-ipvs-proxy: cleanup: --dry-run: nothing changed
`},
		{name: "nothing to remove is said", wantCode: ExitOK, want: "kube-ipvs-proxy: cleanup: nothing of ours to remove\n"},
		{name: "a failure lists what was removed, then the error", removed: proxier.Removed{Interface: "kube-ipvs0"},
			err: errors.New("ipvs: delete virtual server 10.96.0.10:80/TCP: operation not permitted"), wantCode: ExitError,
			want: `kube-ipvs-proxy: cleanup: removed interface kube-ipvs0
kube-ipvs-proxy: cleanup: ipvs: delete virtual server 10.96.0.10:80/TCP: operation not permitted
`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			f := &fakeCleaner{removed: tc.removed, err: tc.err}
			if code := cleanup(f, tc.dryRun, tc.tableOnly, &stderr); code != tc.wantCode {
				t.Errorf("exit %d, want %d", code, tc.wantCode)
			}
			if diff := cmp.Diff(tc.want, stderr.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if len(f.dryRun) != 1 || f.dryRun[0] != tc.dryRun {
				t.Errorf("Clean called with %v, want [%t]", f.dryRun, tc.dryRun)
			}
			if want := map[bool]string{false: "Clean", true: "CleanTable"}[tc.tableOnly]; len(f.calls) != 1 || f.calls[0] != want {
				t.Errorf("called %v, want [%s]", f.calls, want)
			}
		})
	}
}

// TestCleanupDryRunAccepted: --cleanup --dry-run is a preview, not a
// usage error; --cleanup takes no --objects.
func TestCleanupDryRunAccepted(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--cleanup", "--dry-run"}, ""},
		{[]string{"--cleanup", "--dry-run", "--objects", "x"}, "--cleanup takes no --objects"},
	} {
		opts, err := ParseFlags(append(tc.args, "--hostname-override", "n"), &bytes.Buffer{})
		if err == nil {
			err = opts.Validate()
		}
		if (err == nil) != (tc.wantErr == "") || err != nil && !bytes.Contains([]byte(err.Error()), []byte(tc.wantErr)) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.wantErr)
		}
	}
}

// TestTableCleanupWaitsForKubeProxysRules: --cleanup-table-only removes
// our table only once kube-proxy's rules are in the kernel, and not at
// all when they do not come in time.
func TestTableCleanupWaitsForKubeProxysRules(t *testing.T) {
	for _, tc := range []struct {
		name      string
		readyAt   int // the call from which kube-proxy serves; 0: never
		wantCalls int
		wantErr   bool
	}{
		{"already serving: no wait", 1, 1, false},
		{"serving after its first sync: waits for it", 4, 4, false},
		{"never: the table stays", 0, 6, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			serves := func() (bool, error) { calls++; return tc.readyAt > 0 && calls >= tc.readyAt, nil }
			var stderr bytes.Buffer
			err := waitForKubeProxy(serves, func(time.Duration) {}, 5*tableCleanupEvery, &stderr)
			if (err != nil) != tc.wantErr || calls != tc.wantCalls {
				t.Errorf("waitForKubeProxy = %v after %d looks; want error %v after %d", err, calls, tc.wantErr, tc.wantCalls)
			}
		})
	}
}
