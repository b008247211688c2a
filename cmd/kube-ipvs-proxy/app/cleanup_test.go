package app

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

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
// our table only once kube-proxy's rules are in the kernel, in whatever
// form; it waits at most --cleanup-wait, and a failed look is said once
// and looked again, never a reason to stop waiting. No real sleep: the
// waiter's sleep is counted.
func TestTableCleanupWaitsForKubeProxysRules(t *testing.T) {
	lookErr := errors.New("permission denied")
	for _, tc := range []struct {
		name      string
		look      func(call int) (string, error) // kube-proxy's rules at each look, from 1
		wantForm  string
		wantCalls int
		wantSaid  []string // lines stderr must hold
	}{
		{name: "already serving: no wait", look: func(int) (string, error) { return "iptables-nft", nil },
			wantForm: "iptables-nft", wantCalls: 1},
		{name: "serving after its first sync: waits for it", look: func(c int) (string, error) {
			if c >= 4 {
				return "nftables", nil
			}
			return "", nil
		}, wantForm: "nftables", wantCalls: 4, wantSaid: []string{"waiting up to 5s for kube-proxy's rules"}},
		{name: "never: the wait ends at the limit", look: func(int) (string, error) { return "", nil },
			wantCalls: 6, wantSaid: []string{"waiting up to 5s"}},
		{name: "a failed look is said once and looked again", look: func(c int) (string, error) {
			if c >= 3 {
				return "iptables-legacy", nil
			}
			return "", lookErr
		}, wantForm: "iptables-legacy", wantCalls: 3, wantSaid: []string{"look for kube-proxy's rules: permission denied\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls, slept := 0, time.Duration(0)
			var stderr bytes.Buffer
			w := waiter{serves: func() (string, error) { calls++; return tc.look(calls) },
				sleep: func(d time.Duration) { slept += d }, limit: 5 * tableCleanupEvery, stderr: &stderr}
			form := w.wait()
			if form != tc.wantForm || calls != tc.wantCalls {
				t.Errorf("wait = %q after %d looks; want %q after %d", form, calls, tc.wantForm, tc.wantCalls)
			}
			if want := time.Duration(calls-1) * tableCleanupEvery; slept != want {
				t.Errorf("slept %v, want %v", slept, want)
			}
			for _, line := range tc.wantSaid {
				if n := strings.Count(stderr.String(), line); n != 1 {
					t.Errorf("stderr says %q %d times, want once:\n%s", line, n, stderr.String())
				}
			}
		})
	}
}

// TestTableCleanupTimeoutSaysWhatStaysAndHowToGoOn: the line (and Node
// Event) of a wait that ran out names the limit, every form looked for,
// that our table stays, how to remove it, and the last failed look.
func TestTableCleanupTimeoutSaysWhatStaysAndHowToGoOn(t *testing.T) {
	w := waiter{serves: func() (string, error) { return "", errors.New("no CAP_NET_ADMIN") },
		sleep: func(time.Duration) {}, limit: 3 * time.Second, stderr: io.Discard}
	if form := w.wait(); form != "" {
		t.Fatalf("wait = %q, want none", form)
	}
	msg := w.timeoutMessage()
	for _, want := range []string{"after 3s", "iptables-nft", "iptables-legacy", "ip/ip6 kube-proxy", "inet kube-ipvs-proxy stays",
		"--cleanup-wait=0", "no CAP_NET_ADMIN"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not say %q", msg, want)
		}
	}
	if len(truncateEvent(strings.Repeat("x", 5000))) > 1024 {
		t.Errorf("an Event message is not truncated to 1024 bytes")
	}
}

// eventSink keeps the Events created.
type eventSink struct {
	record.EventSink
	created []*corev1.Event
}

func (s *eventSink) Create(e *corev1.Event) (*corev1.Event, error) {
	s.created = append(s.created, e)
	return e, nil
}

// TestTableCleanupTimeoutIsANodeEvent: the wait's end is one Warning
// Event on the Node, where kubectl describe node shows it.
func TestTableCleanupTimeoutIsANodeEvent(t *testing.T) {
	var sink eventSink
	if err := recordNodeEvent(&sink, "node-a", reasonKubeProxyRulesMissing, strings.Repeat("m", 2000), time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	if len(sink.created) != 1 {
		t.Fatalf("%d Events, want 1", len(sink.created))
	}
	e := sink.created[0]
	if e.InvolvedObject.Kind != "Node" || e.InvolvedObject.Name != "node-a" || e.Namespace != "default" ||
		e.Type != corev1.EventTypeWarning || e.Reason != "KubeProxyRulesMissing" || len(e.Message) > 1024 || e.Source.Host != "node-a" {
		t.Errorf("Event %+v: want a Warning KubeProxyRulesMissing on Node node-a, in default, its message at most 1024 bytes", e)
	}
}
