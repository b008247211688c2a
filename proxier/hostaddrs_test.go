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
// Its Watch reports one change (as the real one does on subscribing).
type flakyHostAddresses struct {
	failures int32
	addrs    []netip.Addr
	calls    atomic.Int32
}

func (f *flakyHostAddresses) List() ([]netip.Addr, error) {
	if f.calls.Add(1) <= f.failures {
		return nil, errors.New("list addresses: results may be incomplete or inconsistent")
	}
	return f.addrs, nil
}

func (f *flakyHostAddresses) Watch(ctx context.Context, changed func()) {
	changed()
	<-ctx.Done()
}

// TestHostAddressesRetriedAfterAFailedList: a failed List (as every dump
// fails while addresses keep changing, at a cold start) is tried again
// without waiting for another address event, until one succeeds; the
// addresses it returns are applied.
func TestHostAddressesRetriedAfterAFailedList(t *testing.T) {
	want := []netip.Addr{netip.MustParseAddr("192.0.2.10")}
	ha := &flakyHostAddresses{failures: 4, addrs: want}
	tp := newTestProxier(t, func(c *Config) { c.HostAddresses = ha })
	tp.hostAddrRetry = 10 * time.Millisecond
	baseline(tp)
	tp.start(t)
	waitFor(t, "a List after the failures", func() bool { return ha.calls.Load() > ha.failures })
	if c := tp.t.setHostAddresses(want); c.dirty {
		t.Errorf("the addresses of the List that succeeded were not applied")
	}
	time.Sleep(50 * time.Millisecond)
	if got, max := ha.calls.Load(), ha.failures+2; got > max {
		t.Errorf("%d Lists, want at most %d: retries go on after a success", got, max)
	}
}
