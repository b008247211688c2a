package app

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/record"
)

// TestAFailedServerIsRetriedUnlessHardFail: a health or metrics server
// that fails is a Warning Event on the Node; with bindAddressHardFail the
// proxy stops with the error, without it the server is started again
// every serverRetryEvery until it serves, as kube-proxy.
func TestAFailedServerIsRetriedUnlessHardFail(t *testing.T) {
	busy := errors.New("listen tcp 0.0.0.0:10256: bind: address already in use")
	for _, tc := range []struct {
		name      string
		hardFail  bool
		failFirst int32 // runs that fail before one serves
		wantRuns  int32
		wantStop  bool
		wantEvent int
	}{
		{name: "hard fail stops the proxy at the first failure", hardFail: true, failFirst: 3, wantRuns: 1, wantStop: true, wantEvent: 1},
		{name: "soft fail starts the server again until it serves", failFirst: 3, wantRuns: 4, wantEvent: 3},
		{name: "a server that serves at once records nothing", failFirst: 0, wantRuns: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancelCtx := context.WithCancelCause(context.Background())
			defer cancelCtx(nil)
			var runs atomic.Int32
			serving := make(chan struct{})
			s := server{what: "healthz", addr: "0.0.0.0:10256", reason: reasonHealthzFailed, retryEvery: 10 * time.Millisecond, run: func(ctx context.Context, _ string) error {
				if runs.Add(1) <= tc.failFirst {
					return busy
				}
				close(serving)
				<-ctx.Done()
				return nil
			}}
			rec := record.NewFakeRecorder(10)
			done := make(chan struct{})
			go func() { defer close(done); keepServing(ctx, s, tc.hardFail, rec, nodeRef("node-a"), cancelCtx) }()
			select {
			case <-serving:
				cancelCtx(nil)
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("neither served nor stopped")
			}
			<-done
			if got := runs.Load(); got != tc.wantRuns {
				t.Errorf("runs = %d, want %d", got, tc.wantRuns)
			}
			if stopped := errors.Is(context.Cause(ctx), busy); stopped != tc.wantStop {
				t.Errorf("stopped the proxy with the error: %v, want %v (cause %v)", stopped, tc.wantStop, context.Cause(ctx))
			}
			close(rec.Events)
			n := 0
			for e := range rec.Events {
				n++
				if !strings.Contains(e, "Warning "+reasonHealthzFailed) || !strings.Contains(e, "address already in use") {
					t.Errorf("event %q, want a Warning %s naming the error", e, reasonHealthzFailed)
				}
			}
			if n != tc.wantEvent {
				t.Errorf("%d events, want %d", n, tc.wantEvent)
			}
		})
	}
}
