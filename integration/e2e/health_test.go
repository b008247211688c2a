//go:build !integration

package e2e

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/cmd/kube-ipvs-proxy/app"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
)

// watch runs app.Watch with args (the kubeconfig, node name and health
// address are added) over dp until the test ends.
func watch(t *testing.T, kubeconfig, healthzAddr string, dp proxier.DataPlaneWriter, args ...string) {
	t.Helper()
	opts, err := app.ParseFlags(append([]string{"--kubeconfig", kubeconfig, "--hostname-override", nodeName,
		"--healthz-bind-address", healthzAddr, "--metrics-bind-address", ""}, args...), io.Discard)
	if err == nil {
		err = opts.Validate()
	}
	if err != nil {
		t.Fatalf("flags: %v", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	open := func() (proxier.DataPlaneWriter, func(), error) { return dp, func() {}, nil }
	go func() { done <- app.Watch(ctx, opts, open, io.Discard) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	})
}

// TestHealthzUnhealthyWhenTheFirstSyncNeverHappens: the apiserver is
// unreachable from the start, so no sync ever happens: /healthz and
// /livez answer 200 while starting up, then 503 once the health timeout
// (2 × --ipvs-sync-period) has passed since the start, as kube-proxy.
func TestHealthzUnhealthyWhenTheFirstSyncNeverHappens(t *testing.T) {
	const period = time.Second
	// A kubeconfig naming a port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://`+dead+`"}}]
users: [{name: u, user: {}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	healthzAddr := freeAddr(t)
	start := time.Now()
	dp := &recorder{}
	watch(t, kubeconfig, healthzAddr, dp, "--ipvs-sync-period", period.String())
	waitFor(t, "/healthz to answer", func() bool { code, _ := getQuietPath(healthzAddr, "/healthz"); return code != 0 })
	if code, body := getQuietPath(healthzAddr, "/healthz"); time.Since(start) < 2*period-500*time.Millisecond && code != 200 {
		t.Errorf("/healthz while starting up: %d %s, want 200", code, body)
	}
	took := waitFor(t, "/healthz 503", func() bool { code, _ := getQuietPath(healthzAddr, "/healthz"); return code == 503 })
	since := time.Since(start)
	t.Logf("/healthz turned 503 %v after the start (health timeout %v)", since, 2*period)
	if since < 2*period-100*time.Millisecond || took > 3*period {
		t.Errorf("/healthz turned 503 %v after the start, want about %v", since, 2*period)
	}
	if code, body := getQuietPath(healthzAddr, "/livez"); code != 503 {
		t.Errorf("/livez %d %s, want 503", code, body)
	}
	if n := len(dp.snapshot()); n != 0 {
		t.Errorf("%d data plane calls without an apiserver, want none", n)
	}
}

// failingOnce is a data plane whose first call fails.
type failingOnce struct {
	proxier.NopDataPlane // nothing else to fake
	mu                   sync.Mutex
	times                []time.Time
	full                 []bool
}

func (f *failingOnce) record(full bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.times, f.full = append(f.times, time.Now()), append(f.full, full)
	if len(f.times) == 1 {
		return errors.New("injected failure")
	}
	return nil
}

func (f *failingOnce) Apply([]policy.ServicePlan) error { return f.record(false) }
func (f *failingOnce) Resync(policy.Plan) error         { return f.record(true) }
func (f *failingOnce) NeedsResync() bool                { return false }

func (f *failingOnce) calls() ([]time.Time, []bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.times...), append([]bool(nil), f.full...)
}

// TestFailedSyncRetriedWithinASecond: against a real apiserver, with the
// periodic resync an hour away and nothing changing, a sync that fails
// once is retried, as a full resync, about a second later.
func TestFailedSyncRetriedWithinASecond(t *testing.T) {
	c, _ := startWithWeb(t)
	dp := &failingOnce{}
	watch(t, c.Kubeconfig("admin"), freeAddr(t), dp, "--ipvs-sync-period", "1h")
	waitFor(t, "the retry", func() bool { times, _ := dp.calls(); return len(times) >= 2 })
	times, full := dp.calls()
	gap := times[1].Sub(times[0])
	t.Logf("the failed sync was retried after %v (full: %v)", gap, full[:2])
	if gap < 500*time.Millisecond || gap > 2*time.Second || !full[1] {
		t.Errorf("retried after %v (full %v), want a full resync about 1 s later", gap, full[1])
	}
}

// getQuietPath is a GET of addr's path without failing the test: 0 when
// nothing answers.
func getQuietPath(addr, path string) (int, string) {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
