package ipvs

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// fakeClock is a clock a test steps.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// TestDriftScheduleRules: when Check reads the kernel, on a fake clock.
func TestDriftScheduleRules(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		run  func(s *driftSchedule, c *fakeClock) []string // what was due, in order
		want []string
	}{
		{
			name: "a drift check begins at most once per interval",
			run: func(s *driftSchedule, c *fakeClock) []string {
				var out []string
				for _, step := range []time.Duration{0, 500 * time.Millisecond, 499 * time.Millisecond, time.Millisecond} {
					c.advance(step)
					out = append(out, fmt.Sprintf("%v:%v", c.t.Sub(t0), s.begin()))
				}
				return out
			},
			want: []string{"0s:true", "500ms:false", "999ms:false", "1s:true"},
		},
		{
			name: "a cheap count is due again after the interval",
			run: func(s *driftSchedule, c *fakeClock) []string {
				start, _ := s.countStart()
				c.advance(10 * time.Millisecond)
				s.counted(start, c.t.Sub(start), nil)
				return []string{s.countDue.Sub(t0).String(), fmt.Sprint(s.countsRead)}
			},
			want: []string{"1s", "true"},
		},
		{
			name: "a costly count is spaced to fifty times its duration",
			run: func(s *driftSchedule, c *fakeClock) []string {
				start, _ := s.countStart()
				c.advance(100 * time.Millisecond)
				s.counted(start, c.t.Sub(start), nil)
				c.advance(4 * time.Second)
				_, dueEarly := s.countStart()
				c.advance(900 * time.Millisecond)
				_, due := s.countStart()
				return []string{s.countDue.Sub(t0).String(), fmt.Sprint(dueEarly), fmt.Sprint(due)}
			},
			want: []string{"5s", "false", "true"},
		},
		{
			name: "an unreadable table is counted again after a minute, and the dump of virtual servers stands in",
			run: func(s *driftSchedule, c *fakeClock) []string {
				start, _ := s.countStart()
				s.counted(start, 0, errors.New("no /proc/net/ip_vs"))
				return []string{s.countDue.Sub(t0).String(), fmt.Sprint(s.countsRead)}
			},
			want: []string{"1m0s", "false"},
		},
		{
			name: "a costly dump is spaced to fifty times its duration",
			run: func(s *driftSchedule, c *fakeClock) []string {
				start, due := s.dumpStart()
				c.advance(40 * time.Millisecond)
				s.dumped(start)
				return []string{fmt.Sprint(due), s.dumpDue.Sub(t0).String()}
			},
			want: []string{"true", "2s"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &fakeClock{t: t0}
			s := &driftSchedule{now: c.now, checkedAt: t0.Add(-time.Hour)}
			if diff := cmp.Diff(tc.want, tc.run(s, c)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestRetryScheduleRules: a failed service's backoff.
func TestRetryScheduleRules(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	a, b := policy.ServiceKey{Namespace: "ns", Name: "a"}, policy.ServiceKey{Namespace: "ns", Name: "b"}
	for _, tc := range []struct {
		name string
		run  func(r *retrySchedule) []string
		want []string
	}{
		{
			name: "the first retry is a second after the failure, doubling with each failure, at most two minutes",
			run: func(r *retrySchedule) []string {
				var out []string
				for range 9 {
					r.failedAt(a, t0)
					out = append(out, r.next().Sub(t0).String())
				}
				return out
			},
			want: []string{"1s", "2s", "4s", "8s", "16s", "32s", "1m4s", "2m0s", "2m0s"},
		},
		{
			name: "a success clears the backoff",
			run: func(r *retrySchedule) []string {
				r.failedAt(a, t0)
				r.failedAt(a, t0)
				r.succeeded(a)
				r.failedAt(a, t0)
				return []string{r.next().Sub(t0).String(), fmt.Sprint(r.services())}
			},
			want: []string{"1s", "[ns/a]"},
		},
		{
			name: "only the services whose time has come are due, sorted, and next is the earliest",
			run: func(r *retrySchedule) []string {
				r.failedAt(b, t0)
				r.failedAt(a, t0)
				r.failedAt(a, t0) // 2s
				return []string{fmt.Sprint(r.due(t0.Add(time.Second))), fmt.Sprint(r.due(t0.Add(2 * time.Second))),
					r.next().Sub(t0).String()}
			},
			want: []string{"[ns/b]", "[ns/a ns/b]", "1s"},
		},
		{
			name: "none failed: nothing due and no next retry",
			run: func(r *retrySchedule) []string {
				return []string{fmt.Sprint(len(r.due(t0))), fmt.Sprint(r.next().IsZero())}
			},
			want: []string{"0", "true"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRetrySchedule()
			if diff := cmp.Diff(tc.want, tc.run(&r)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
