package proxier

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// runner calls its function at most once per minInterval and at least
// once per maxInterval, like kube-proxy's BoundedFrequencyRunner:
//   - Run requests a call; requests made before the call starts coalesce
//     into one;
//   - a call never starts sooner than minInterval after the previous one
//     ended, whatever asked for it;
//   - every maxInterval the call is marked periodic (the proxier's full
//     resync); the periodic deadline is kept from the last periodic call,
//     not the last call, so steady changes cannot postpone it;
//   - after a failed call, another one is made retryInterval after it
//     (but still not sooner than minInterval), even without a request.
//
// The clock is injectable; tests drive it with a fake clock and the idle
// hook.
type runner struct {
	fn                       func(periodic bool) error
	minInterval, maxInterval time.Duration
	retryInterval            time.Duration
	clock                    clock.Clock
	kick                     chan struct{} // capacity 1: requests coalesce

	// idle, if set, receives the wake-up time each time the loop is about
	// to block (after its timer is armed). Tests only.
	idle chan time.Time
}

func newRunner(fn func(periodic bool) error, minInterval, maxInterval, retryInterval time.Duration, clk clock.Clock) *runner {
	return &runner{fn: fn, minInterval: minInterval, maxInterval: maxInterval, retryInterval: retryInterval,
		clock: clk, kick: make(chan struct{}, 1)}
}

// Run requests a call. It never blocks.
func (r *runner) Run() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// schedule is the runner's state between calls.
type schedule struct {
	lastEnd    time.Time // end of the last call; zero before the first
	periodicAt time.Time // when the next call is periodic
	retryAt    time.Time // zero unless the last call failed
	pending    bool      // a call was requested
}

// next returns when the next call is due; a time not after now means at
// once.
func (s schedule) next(minInterval time.Duration) time.Time {
	wake := s.periodicAt
	earliest := s.lastEnd.Add(minInterval)
	switch {
	case s.pending:
		wake = earliest
	case !s.retryAt.IsZero() && s.retryAt.Before(wake):
		wake = s.retryAt
	}
	if !s.lastEnd.IsZero() && wake.Before(earliest) {
		wake = earliest
	}
	return wake
}

// Loop runs until ctx is done. The first call happens when requested or
// after maxInterval.
func (r *runner) Loop(ctx context.Context) {
	s := schedule{periodicAt: r.clock.Now().Add(r.maxInterval)}
	for {
		now := r.clock.Now()
		if wake := s.next(r.minInterval); !wake.After(now) {
			periodic := !now.Before(s.periodicAt)
			err := r.fn(periodic)
			s.lastEnd, s.pending, s.retryAt = r.clock.Now(), false, time.Time{}
			if periodic {
				s.periodicAt = s.lastEnd.Add(r.maxInterval)
			}
			if err != nil {
				s.retryAt = s.lastEnd.Add(r.retryInterval)
			}
			continue
		}
		if !r.wait(ctx, &s, now) {
			return
		}
	}
}

// wait blocks until the next call may be due: its time came, or a call
// was requested. It returns false when ctx is done.
func (r *runner) wait(ctx context.Context, s *schedule, now time.Time) bool {
	wake := s.next(r.minInterval)
	t := r.clock.NewTimer(wake.Sub(now))
	defer t.Stop()
	if r.idle != nil {
		select {
		case r.idle <- wake:
		case <-ctx.Done():
			return false
		}
	}
	select {
	case <-ctx.Done():
		return false
	case <-r.kick:
		s.pending = true
	case <-t.C():
	}
	return true
}
