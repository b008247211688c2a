package hostaddr

import (
	"context"
	"testing"

	"github.com/vishvananda/netlink"
)

// TestDrainTakesABurstAsOne: updates already queued when one arrives
// are taken with it, so a burst costs one call of changed, not one each.
func TestDrainTakesABurstAsOne(t *testing.T) {
	for _, tc := range []struct {
		name   string
		queued int
		want   int
	}{
		{"one update, one call", 1, 1},
		{"a burst of 50 queued updates, one call", 50, 1},
		{"nothing, no call", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			updates := make(chan netlink.AddrUpdate, 64)
			for range tc.queued {
				updates <- netlink.AddrUpdate{LinkIndex: 7}
			}
			close(updates)
			calls := 0
			Netlink{}.drain(context.Background(), updates, func() { calls++ })
			if calls != tc.want {
				t.Errorf("changed called %d times, want %d", calls, tc.want)
			}
		})
	}
}
