package proxier

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startLogged runs tp until the test ends with a default-level (v=0)
// logger writing to the returned buffer, and waits for the first sync.
func (tp *testProxier) startLogged(t *testing.T) *lockedBuffer {
	t.Helper()
	buf := &lockedBuffer{}
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(buf), textlogger.Verbosity(0)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	done := make(chan error, 1)
	go func() { done <- tp.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	waitFor(t, "first sync", func() bool { return tp.Stats().Syncs >= 1 })
	return buf
}

// TestDefaultLevelSyncLog: at v=0 the log shows that the caches synced,
// the first successful sync with what the node programs, and the first
// success after failures; not every sync.
func TestDefaultLevelSyncLog(t *testing.T) {
	tests := []struct {
		name string
		// failFirst: the data plane fails until after the first sync.
		failFirst bool
		// then runs after the first sync; it returns once its sync is done.
		then     func(t *testing.T, tp *testProxier)
		want     []string
		wantNone []string
	}{
		{
			name: "the first sync is summarized, with each writer's time",
			want: []string{`"Informer caches synced; starting the sync loop"`,
				`"First sync done" services=1`, "virtualServers=1 destinations=2", `nftables="3ms" ipvs="7ms"`},
		},
		{
			name: "later syncs are not logged at the default level",
			then: func(t *testing.T, tp *testProxier) {
				before := tp.Stats().Syncs
				if _, err := tp.client.CoreV1().Services("default").Create(t.Context(), service("api", "10.96.0.11"), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				tp.syncedAfter(t, before)
			},
			want:     []string{`"First sync done"`},
			wantNone: []string{"Synced again"},
		},
		{
			name:      "the first success after failures is logged",
			failFirst: true,
			then: func(t *testing.T, tp *testProxier) {
				tp.dp.set(nil, false)
				waitFor(t, "a successful retry", func() bool { return tp.seams.get("Updated") >= 1 })
			},
			want:     []string{`"Sync failed; the next sync is a full resync"`, `"First sync done"`},
			wantNone: []string{"Synced again"},
		},
		{
			name: "a failing service is logged",
			then: func(t *testing.T, tp *testProxier) {
				tp.dp.setFaults([]ServiceFailure{{Service: key("web"), Reason: "KernelError", Err: errBoom}}, time.Now().Add(time.Hour), nil)
				before := tp.Stats().Syncs
				if _, err := tp.client.CoreV1().Services("default").Create(t.Context(), service("api", "10.96.0.11"), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				tp.syncedAfter(t, before)
			},
			want: []string{`"Cannot program service; the rest of the node is synced, retrying it with backoff" err="boom" service="default/web" reason="KernelError"`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTestProxier(t, nil, node(testNode, "192.168.0.10", nil), service("web", "10.96.0.10"),
				slice("web-1", "web", ep{"10.244.1.5", testNode}, ep{"10.244.2.5", "node-b"}))
			if tc.failFirst {
				tp.dp.set(errBoom, true)
			}
			buf := tp.startLogged(t)
			if tc.then != nil {
				tc.then(t, tp)
			}
			// The sync is counted before its milestone is logged, so
			// the wanted lines may come a moment after then returns.
			deadline := time.Now().Add(10 * time.Second)
			for _, w := range tc.want {
				for !strings.Contains(buf.String(), w) && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
			}
			out := buf.String()
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("log lacks %s:\n%s", w, out)
				}
			}
			for _, w := range tc.wantNone {
				if strings.Contains(out, w) {
					t.Errorf("log has %s:\n%s", w, out)
				}
			}
		})
	}
}

// TestDefaultLevelRecoveryLog: a success after a failed sync, once the
// proxy had synced, is logged at v=0 with the node's totals.
func TestDefaultLevelRecoveryLog(t *testing.T) {
	tp := newTestProxier(t, nil, node(testNode, "192.168.0.10", nil), service("web", "10.96.0.10"))
	buf := tp.startLogged(t)
	tp.dp.set(errBoom, true)
	before := tp.Stats().Syncs
	if _, err := tp.client.CoreV1().Services("default").Create(t.Context(), service("api", "10.96.0.11"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tp.syncedAfter(t, before)
	tp.dp.set(nil, false)
	waitFor(t, "a successful retry", func() bool { return tp.Stats().LastError == nil && tp.Stats().Syncs > before+1 })
	waitFor(t, "the recovery log", func() bool { return strings.Contains(buf.String(), `"Synced again after failures"`) })
	if out := buf.String(); !strings.Contains(out, `"Synced again after failures" services=2`) || !strings.Contains(out, "virtualServers=2") {
		t.Errorf("recovery log lacks the totals:\n%s", out)
	}
}
