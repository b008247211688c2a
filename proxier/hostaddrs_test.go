package proxier

import (
	"context"
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

// flakyHostAddresses fails its first failures Lists, then returns addrs.
// Its Watch reports a change each time the test sends one on events (the
// real one also reports one on subscribing; here only the proxier's own
// retries may List until the test says otherwise).
type flakyHostAddresses struct {
	failures int32
	addrs    []netip.Addr
	calls    atomic.Int32
	events   chan struct{}
}

func (f *flakyHostAddresses) List() ([]netip.Addr, error) {
	if f.calls.Add(1) <= f.failures {
		return nil, errors.New("list addresses: results may be incomplete or inconsistent")
	}
	return f.addrs, nil
}

func (f *flakyHostAddresses) Watch(ctx context.Context, changed func()) {
	for {
		select {
		case <-f.events:
			changed()
		case <-ctx.Done():
			return
		}
	}
}

// TestHostAddressesRetriedAfterAFailedList: a failed List (as every dump
// fails while addresses keep changing, at a cold start) is tried again
// without waiting for another address event, until one succeeds; the
// addresses it returns are applied, and the retries stop.
func TestHostAddressesRetriedAfterAFailedList(t *testing.T) {
	want := []netip.Addr{netip.MustParseAddr("192.0.2.10")}
	ha := &flakyHostAddresses{failures: 4, addrs: want, events: make(chan struct{})}
	tp := newTestProxier(t, func(c *Config) { c.HostAddresses = ha })
	tp.hostAddrRetry = 10 * time.Millisecond
	baseline(tp)
	tp.start(t)
	// noRetryAfter waits for List number n, which must succeed, and for
	// its refresh to end (a refresh holds hostAddrMu from its List on);
	// a retry it scheduled would then be pending.
	noRetryAfter := func(what string, n int32) {
		t.Helper()
		waitFor(t, what, func() bool { return ha.calls.Load() >= n })
		tp.hostAddrMu.Lock()
		retrying, calls := tp.hostAddrRetrying.Load(), ha.calls.Load()
		tp.hostAddrMu.Unlock()
		if calls != n || retrying {
			t.Errorf("after %s: %d Lists, a retry pending %t; want %d, none: retries go on after a success",
				what, calls, retrying, n)
		}
	}
	// Lists 1 to 4 fail (the first at start, the others retries); the
	// fifth, a retry too, succeeds.
	noRetryAfter("the List that succeeded", ha.failures+1)
	if c := tp.t.setHostAddresses(want); c.dirty {
		t.Errorf("the addresses of the List that succeeded were not applied")
	}
	ha.events <- struct{}{}
	noRetryAfter("an address event's List", ha.failures+2)
}
