package proxier

import (
	"context"
	"time"

	"k8s.io/utils/clock"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/backoff"
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
//   - after a failed call, another one is made with backoff, even without
//     a request: firstRetry after the first failure, doubling with each
//     further one up to maxInterval, back to firstRetry after a success;
//   - the function may also ask to be called again by a given time (a
//     service's retry is due, or at once): the earlier of that and the
//     backoff wins, except after consecutive failures (the backoff);
//   - while idle, every probeInterval it calls probe (if set), in the same
//     goroutine as the function; probe returning true requests a call.
//
// The clock is injectable; tests drive it with a fake clock and the idle
// hook.
type runner struct {
	fn                       func(periodic bool) (next time.Time, err error)
	minInterval, maxInterval time.Duration
	firstRetry               time.Duration
	probe                    func() bool
	probeInterval            time.Duration
	clock                    clock.Clock
	kick                     chan struct{} // capacity 1: requests coalesce

	// idle, if set, receives the wake-up time each time the loop is about
	// to block (after its timer is armed). Tests only.
	idle chan time.Time
}

func newRunner(fn func(periodic bool) (time.Time, error), minInterval, maxInterval, firstRetry time.Duration, clk clock.Clock) *runner {
	return &runner{fn: fn, minInterval: minInterval, maxInterval: maxInterval, firstRetry: firstRetry,
		clock: clk, kick: make(chan struct{}, 1)}
}

// withProbe sets the idle probe; before Loop only.
func (r *runner) withProbe(interval time.Duration, probe func() bool) {
	if interval > 0 && probe != nil {
		r.probe, r.probeInterval = probe, interval
	}
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
	retryAt    time.Time // zero unless a retry is due (failure or request)
	failures   int       // consecutive failed calls
	probeAt    time.Time // when the next probe is due; zero without probe
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

// backoff is the delay before the retry after the n-th consecutive
// failure (n ≥ 1).
func (r *runner) backoff(n int) time.Duration {
	return backoff.Delay(n, r.firstRetry, r.maxInterval)
}

// Loop runs until ctx is done. The first call happens when requested or
// after maxInterval.
func (r *runner) Loop(ctx context.Context) {
	now := r.clock.Now()
	s := schedule{periodicAt: now.Add(r.maxInterval)}
	if r.probe != nil {
		s.probeAt = now.Add(r.probeInterval)
	}
	for ctx.Err() == nil {
		now := r.clock.Now()
		if wake := s.next(r.minInterval); !wake.After(now) {
			r.call(&s, now)
			continue
		}
		if !s.probeAt.IsZero() && !s.probeAt.After(now) {
			s.probeAt = now.Add(r.probeInterval)
			if r.probe() {
				s.pending = true
			}
			continue
		}
		if !r.wait(ctx, &s, now) {
			return
		}
	}
}

// call makes one call and schedules the next.
func (r *runner) call(s *schedule, now time.Time) {
	periodic := !now.Before(s.periodicAt)
	next, err := r.fn(periodic)
	s.lastEnd, s.pending, s.retryAt = r.clock.Now(), false, time.Time{}
	if periodic {
		s.periodicAt = s.lastEnd.Add(r.maxInterval)
	}
	if err != nil {
		s.failures++
		s.retryAt = s.lastEnd.Add(r.backoff(s.failures))
	} else {
		s.failures = 0
	}
	// An earlier next time shortens the backoff of a first failure only,
	// so a call failing again and again cannot spin.
	if !next.IsZero() && (s.retryAt.IsZero() || (next.Before(s.retryAt) && s.failures <= 1)) {
		s.retryAt = next
	}
	if !s.probeAt.IsZero() {
		s.probeAt = s.lastEnd.Add(r.probeInterval)
	}
}

// wait blocks until the next call or probe may be due: its time came, or
// a call was requested. It returns false when ctx is done.
func (r *runner) wait(ctx context.Context, s *schedule, now time.Time) bool {
	wake := s.next(r.minInterval)
	if !s.probeAt.IsZero() && s.probeAt.Before(wake) {
		wake = s.probeAt
	}
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
