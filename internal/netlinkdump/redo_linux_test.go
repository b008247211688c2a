package netlinkdump

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

func TestRedoRunsAnInterruptedDumpAgain(t *testing.T) {
	other := errors.New("permission denied")
	for _, tc := range []struct {
		name        string
		interrupted int   // attempts that come back interrupted first
		then        error // what the attempt after them returns
		wantCalls   int
		wantErr     error
		wantValue   int
	}{
		{"a clean dump is taken at once", 0, nil, 1, nil, 1},
		{"an interrupted dump is redone until one is clean", 3, nil, 4, nil, 4},
		{"another error is returned at once, not redone", 1, other, 2, other, 0},
		{"every attempt interrupted: the error says so", Attempts, nil, Attempts, netlink.ErrDumpInterrupted, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var waited []time.Duration
			sleep := func(d time.Duration) { waited = append(waited, d) }
			calls := 0
			v, err := redo(func() (int, error) {
				calls++
				if calls <= tc.interrupted {
					return calls, fmt.Errorf("list addresses: %w", netlink.ErrDumpInterrupted)
				}
				if tc.then != nil {
					return 0, tc.then
				}
				return calls, nil
			}, sleep)
			if calls != tc.wantCalls {
				t.Errorf("%d calls, want %d", calls, tc.wantCalls)
			}
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
			if v != tc.wantValue {
				t.Errorf("value %d, want %d", v, tc.wantValue)
			}
			for k, d := range waited {
				if d != time.Duration(k)*Backoff {
					t.Errorf("attempt %d waited %v, want %v", k, d, time.Duration(k)*Backoff)
				}
			}
		})
	}
}
