package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// bufferLogger is a default-level (v=0) text logger writing to a buffer.
func bufferLogger() (klog.Logger, *syncBuffer) {
	buf := &syncBuffer{}
	return textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(buf), textlogger.Verbosity(0))), buf
}

// TestAPIErrorLogRateLimit: the first failure to reach the API server is
// logged at once, later ones at most once per interval with the count of
// those not logged, and recovery once.
func TestAPIErrorLogRateLimit(t *testing.T) {
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	type step struct {
		at   time.Duration
		err  error // nil: a success
		want string
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"the first failure is logged at once", []step{
			{0, refused, `"Cannot reach the API server; retrying" err="dial tcp 127.0.0.1:1: connect: connection refused" address="api:6443"`},
		}},
		{"repeats within the interval are counted, not logged", []step{
			{0, refused, "Cannot reach"},
			{time.Second, refused, ""},
			{2 * time.Second, refused, ""},
			{31 * time.Second, refused, `address="api:6443" failuresSinceLastLog=2`},
		}},
		{"recovery is logged once", []step{
			{0, refused, "Cannot reach"},
			{time.Second, nil, `"API server reachable again" address="api:6443" failuresSinceLastLog=0`},
			{2 * time.Second, nil, ""},
			{3 * time.Second, refused, "Cannot reach"},
		}},
		{"successes alone log nothing", []step{{0, nil, ""}, {time.Second, nil, ""}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logger, buf := bufferLogger()
			l := newAPIErrorLog(logger)
			start := time.Unix(1000, 0)
			var now time.Time
			l.now = func() time.Time { return now }
			for i, s := range tc.steps {
				before := len(buf.String())
				now = start.Add(s.at)
				if s.err != nil {
					l.failed("api:6443", s.err)
				} else {
					l.succeeded("api:6443")
				}
				got := buf.String()[before:]
				if (s.want == "") != (got == "") || !strings.Contains(got, s.want) {
					t.Errorf("step %d: logged %q, want %q", i, got, s.want)
				}
			}
		})
	}
}

// deadKubeconfig writes a kubeconfig naming a TCP port nothing listens on
// and returns its path and the address.
func deadKubeconfig(t *testing.T) (string, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://`+dead+`"}}]
users: [{name: u, user: {}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, dead
}

// TestInstalledLogCountsEveryRequest: install puts the log on the
// client's transport: every request that cannot reach the API server is
// a failure, logged at once, then counted until the interval has passed;
// a request the client cancels itself is no failure.
func TestInstalledLogCountsEveryRequest(t *testing.T) {
	kubeconfig, dead := deadKubeconfig(t)
	type step struct {
		at       time.Duration
		canceled bool // the request's context is canceled before it is sent
		want     string
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"the first request failing is logged with the address and the error", []step{
			{at: 0, want: `"Cannot reach the API server; retrying" err="dial tcp ` + dead + `: connect: connection refused" address="` + dead + `"`},
		}},
		{"the requests failing within the interval are counted, then logged with the count", []step{
			{at: 0, want: "Cannot reach"},
			{at: time.Second},
			{at: 2 * time.Second},
			{at: apiErrorLogEvery, want: `address="` + dead + `" failuresSinceLastLog=2`},
		}},
		{"a request canceled by its client is not a failure", []step{
			{at: 0, canceled: true},
			{at: time.Second, want: "Cannot reach"},
			{at: time.Second + apiErrorLogEvery, canceled: true},
			{at: 2*time.Second + apiErrorLogEvery, want: "failuresSinceLastLog=0"},
		}},
	}
	handlers := utilruntime.ErrorHandlers
	t.Cleanup(func() { utilruntime.ErrorHandlers = handlers })
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				t.Fatal(err)
			}
			logger, buf := bufferLogger()
			l := newAPIErrorLog(logger)
			start := time.Unix(1000, 0)
			var now time.Time
			l.now = func() time.Time { return now }
			l.install(cfg)
			client, err := rest.HTTPClientFor(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tc.steps {
				before := len(buf.String())
				now = start.Add(s.at)
				ctx, cancel := context.WithCancel(context.Background())
				if s.canceled {
					cancel()
				}
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/api", nil)
				if err != nil {
					t.Fatal(err)
				}
				// The request has returned: the log has said what it
				// will about it.
				if resp, err := client.Do(req); err == nil {
					resp.Body.Close()
					t.Fatalf("step %d: a request to %s got through", i, dead)
				}
				cancel()
				got := buf.String()[before:]
				if (s.want == "") != (got == "") || !strings.Contains(got, s.want) {
					t.Errorf("step %d: logged %q, want %q", i, got, s.want)
				}
			}
		})
	}
}

// TestWatchUnreachableAPIServer: against a closed port, the default-level
// log says that the caches are awaited and that the API server cannot be
// reached, with its address and the error, and the proxy returns once
// stopped. (How often the failure is logged: the tests above; how long
// the stop waits for reflectors backing off: the proxier's
// TestStopWaitsForTheInformersAtMostInformerStopWait, on a fake clock.)
func TestWatchUnreachableAPIServer(t *testing.T) {
	kubeconfig, dead := deadKubeconfig(t)
	opts, err := ParseFlags([]string{"--dry-run", "--kubeconfig", kubeconfig, "--hostname-override", "node-a",
		"--healthz-bind-address", "", "--metrics-bind-address", ""}, io.Discard)
	if err == nil {
		err = opts.Validate()
	}
	if err != nil {
		t.Fatal(err)
	}
	handlers := utilruntime.ErrorHandlers
	t.Cleanup(func() { utilruntime.ErrorHandlers = handlers })
	out := newWatchedBuffer()
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(out), textlogger.Verbosity(0)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Watch(ctx, opts, openNop, io.Discard) }()
	out.waitFor(t, `"Waiting for informer caches to sync"`, `"Cannot reach the API server; retrying"`,
		`address="`+dead+`"`, "connection refused")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Watch: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Watch did not return within 30 s of the stop")
	}
}

// watchedBuffer is a syncBuffer that wakes waitFor at every write.
type watchedBuffer struct {
	syncBuffer
	wrote chan struct{}
}

func newWatchedBuffer() *watchedBuffer { return &watchedBuffer{wrote: make(chan struct{}, 1)} }

func (w *watchedBuffer) Write(p []byte) (int, error) {
	n, err := w.syncBuffer.Write(p)
	select {
	case w.wrote <- struct{}{}:
	default: // a wake-up is pending already
	}
	return n, err
}

// waitFor waits until the buffer holds every one of wants; the real-clock
// bound only turns a hang into a failure.
func (w *watchedBuffer) waitFor(t *testing.T, wants ...string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		out := w.String()
		missing := slices.DeleteFunc(slices.Clone(wants), func(s string) bool { return strings.Contains(out, s) })
		if len(missing) == 0 {
			return
		}
		select {
		case <-w.wrote:
		case <-deadline:
			t.Fatalf("after 30 s the default-level log lacks %q:\n%s", missing, out)
		}
	}
}

// TestHandledErrorsOncePerIntervalEach: an error client-go reports
// through utilruntime.HandleError (a reflector's failed list on a 403 or
// a 500) is logged at the default level at most once per interval for
// each distinct error, with the count of those not logged; one that only
// wraps the transport failure already logged is not logged again.
func TestHandledErrorsOncePerIntervalEach(t *testing.T) {
	forbidden := errors.New(`failed to list *v1.Service: services is forbidden: User "x" cannot list resource "services"`)
	internal := errors.New("failed to list *v1.Node: an error on the server has prevented the request from succeeding")
	refused := errors.New("dial tcp 10.0.0.1:6443: connect: connection refused")
	wrapped := errors.New(`failed to list *v1.Service: Get "https://10.0.0.1:6443/api/v1/services": dial tcp 10.0.0.1:6443: connect: connection refused`)
	type step struct {
		at        time.Duration
		transport bool // a transport failure (nil err: a success)
		err       error
		want      string // "": nothing logged
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"the first of an error is logged at once", []step{
			{at: 0, err: forbidden, want: `"Failed to watch" err="failed to list *v1.Service: services is forbidden`},
		}},
		{"repeats within the interval are counted, then logged with the count", []step{
			{at: 0, err: forbidden, want: "Failed to watch"},
			{at: time.Second, err: forbidden},
			{at: 20 * time.Second, err: forbidden},
			{at: 31 * time.Second, err: forbidden, want: `type="*v1.Service" failuresSinceLastLog=2`},
			{at: 32 * time.Second, err: forbidden},
		}},
		{"distinct errors are limited each on its own", []step{
			{at: 0, err: forbidden, want: "services is forbidden"},
			{at: time.Second, err: internal, want: "an error on the server"},
			{at: 2 * time.Second, err: forbidden},
			{at: 3 * time.Second, err: internal},
		}},
		{"an error wrapping the logged transport failure is not logged again", []step{
			{at: 0, transport: true, err: refused, want: "Cannot reach the API server"},
			{at: time.Second, err: wrapped},
			{at: 31 * time.Second, transport: true, err: refused, want: "failuresSinceLastLog=1"},
		}},
		{"after recovery, the wrapping error is logged", []step{
			{at: 0, transport: true, err: refused, want: "Cannot reach the API server"},
			{at: time.Second, transport: true, want: "API server reachable again"},
			{at: 2 * time.Second, err: wrapped, want: "connection refused"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logger, buf := bufferLogger()
			ctx := klog.NewContext(context.Background(), logger)
			l := newAPIErrorLog(logger)
			start := time.Unix(1000, 0)
			var now time.Time
			l.now = func() time.Time { return now }
			for i, s := range tc.steps {
				before := len(buf.String())
				now = start.Add(s.at)
				switch {
				case s.transport && s.err != nil:
					l.failed("10.0.0.1:6443", s.err)
				case s.transport:
					l.succeeded("10.0.0.1:6443")
				default:
					l.handleError(ctx, s.err, "Failed to watch", "reflector", "informers.go:82", "type", "*v1.Service")
				}
				got := buf.String()[before:]
				if (s.want == "") != (got == "") || !strings.Contains(got, s.want) {
					t.Errorf("step %d: logged %q, want %q", i, got, s.want)
				}
				if strings.Count(got, "\n") > 1 {
					t.Errorf("step %d: logged %d lines, want at most one", i, strings.Count(got, "\n"))
				}
			}
		})
	}
}

// TestHandledErrorsAreRememberedBoundedly: a stream of distinct errors
// keeps at most maxHandledErrors of them.
func TestHandledErrorsAreRememberedBoundedly(t *testing.T) {
	logger, _ := bufferLogger()
	l := newAPIErrorLog(logger)
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	for i := range 3 * maxHandledErrors {
		now = now.Add(time.Millisecond)
		l.handleError(context.Background(), fmt.Errorf("error %d", i), "Failed to watch")
	}
	if n := len(l.handled); n > maxHandledErrors {
		t.Errorf("%d distinct errors remembered, want at most %d", n, maxHandledErrors)
	}
}
