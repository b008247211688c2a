package ipvs

import (
	"maps"
	"slices"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/backoff"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// The Writer's two schedules, each with the clock it is given
// (Config.Now, time.Now by default), so that tests step a fake one:
// when Check reads the kernel for drift (driftSchedule), and when a
// failed service is retried (retrySchedule).

// driftCheckInterval spaces Check's dumps of the addresses and reads of
// the virtual servers: at most one a second, whatever the loop's probe
// interval, so that an idle node with thousands of services does not
// read them twice a second, and a deletion is still noticed within a
// second while the reads are cheap. Costly reads are spaced more (see
// countCheckCostShare).
const driftCheckInterval = time.Second

// driftSchedule says when Check reads what. A drift check is made at
// most once per driftCheckInterval; within it, the destination count
// (destcount.go) and the dump of the addresses (and of the virtual
// servers where the count cannot be read) are each spaced to
// countCheckCostShare times their last duration, and the destinations
// are read in turn (destcheck.go) within destCheckBudget.
type driftSchedule struct {
	now       func() time.Time
	checkedAt time.Time // when the last drift check began
	countDue  time.Time // when the destinations are next counted
	dumpDue   time.Time // when the addresses are next dumped
	// countsRead: the last count succeeded. It lists every virtual
	// server, so the dump of virtual servers is not needed.
	countsRead bool
	cursor     destCursor // where the turn of destination reads is
}

// begin reports whether a drift check is due now, and if so marks it
// begun.
func (s *driftSchedule) begin() bool {
	now := s.now()
	if now.Sub(s.checkedAt) < driftCheckInterval {
		return false
	}
	s.checkedAt = now
	return true
}

// spaced is when a read that began at start, and has just ended, is next
// due: driftCheckInterval later, or countCheckCostShare times its
// duration when that is longer.
func (s *driftSchedule) spaced(start time.Time) time.Time {
	return start.Add(max(driftCheckInterval, countCheckCostShare*s.now().Sub(start)))
}

// countStart reports whether the count is due, and when it begins.
func (s *driftSchedule) countStart() (time.Time, bool) {
	now := s.now()
	return now, !now.Before(s.countDue)
}

// counted records a count that began at start: next due as its cost
// allows, or after countCheckRetry when it failed (err).
func (s *driftSchedule) counted(start time.Time, err error) {
	s.countsRead = err == nil
	if err != nil {
		s.countDue = start.Add(countCheckRetry)
		return
	}
	s.countDue = s.spaced(start)
}

// dumpStart reports whether the dump is due, and when it begins.
func (s *driftSchedule) dumpStart() (time.Time, bool) {
	now := s.now()
	return now, !now.Before(s.dumpDue)
}

// dumped records a dump that began at start.
func (s *driftSchedule) dumped(start time.Time) { s.dumpDue = s.spaced(start) }

// retrySchedule is the failed services' backoff: each one's consecutive
// failures and when it is retried.
type retrySchedule struct {
	failed map[policy.ServiceKey]*retry
}

// retry is a failed service's backoff.
type retry struct {
	failures int
	at       time.Time
}

func newRetrySchedule() retrySchedule { return retrySchedule{failed: map[policy.ServiceKey]*retry{}} }

// failedAt schedules svc's retry after a failure at now: backoff.Initial
// after its first failure, doubling with each further one, at most
// backoff.ServiceMax.
func (r *retrySchedule) failedAt(svc policy.ServiceKey, now time.Time) {
	x := r.failed[svc]
	if x == nil {
		x = &retry{}
		r.failed[svc] = x
	}
	x.failures++
	x.at = now.Add(backoff.Delay(x.failures, backoff.Initial, backoff.ServiceMax))
}

// succeeded clears svc's backoff.
func (r *retrySchedule) succeeded(svc policy.ServiceKey) { delete(r.failed, svc) }

// due returns the failed services whose retry is due at now, sorted.
func (r *retrySchedule) due(now time.Time) []policy.ServiceKey {
	var out []policy.ServiceKey
	for _, svc := range r.services() {
		if !now.Before(r.failed[svc].at) {
			out = append(out, svc)
		}
	}
	return out
}

// services returns the failed services, sorted.
func (r *retrySchedule) services() []policy.ServiceKey {
	return slices.SortedFunc(maps.Keys(r.failed), policy.ServiceKey.Compare)
}

// next returns the earliest retry; zero when none failed.
func (r *retrySchedule) next() time.Time {
	var next time.Time
	for _, x := range r.failed {
		if next.IsZero() || x.at.Before(next) {
			next = x.at
		}
	}
	return next
}
