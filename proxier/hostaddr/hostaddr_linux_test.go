package hostaddr

import (
	"context"
	"errors"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// fakeEvents hands out reads of link indexes: reads[i] is the i-th
// read's; after the last, a read with wait fails with errDone.
type fakeEvents struct{ reads [][]int }

var errDone = errors.New("no more reads")

func (f *fakeEvents) read(idx []int, wait bool) ([]int, bool, error) {
	if len(f.reads) == 0 {
		if wait {
			return idx, false, errDone
		}
		return idx, false, nil
	}
	r := f.reads[0]
	f.reads = f.reads[1:]
	return append(idx, r...), true, nil
}

// TestFollowTakesABurstAsOne: events already queued when one arrives are
// taken with it, so a burst costs one call of changed, not one each; a
// burst of the excluded interface's events alone costs none.
func TestFollowTakesABurstAsOne(t *testing.T) {
	burst := make([][]int, 50)
	for i := range burst {
		burst[i] = []int{7}
	}
	for _, tc := range []struct {
		name  string
		reads [][]int
		index int // the excluded interface's; 0: none
		want  int
	}{
		{name: "one event, one call", reads: [][]int{{7}}, want: 1},
		{name: "a burst of 50 queued events, one call", reads: burst, want: 1},
		{name: "nothing, no call", want: 0},
		{name: "the excluded interface's burst, no call", reads: burst, index: 7, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := Netlink{}
			var ex excluded
			if tc.index != 0 {
				n.Exclude = "kube-ipvs0"
				ex = excluded{index: tc.index, checked: time.Now()}
			}
			calls := 0
			err := n.followFrom(context.Background(), &fakeEvents{reads: tc.reads}, ex, func() { calls++ })
			if !errors.Is(err, errDone) {
				t.Errorf("follow: %v, want the reads' end", err)
			}
			if calls != tc.want {
				t.Errorf("changed called %d times, want %d", calls, tc.want)
			}
		})
	}
}

// TestSubscriptionSeesOtherLinksAddressesOnly holds the subscription to
// the host's kernel, in a fresh network namespace: addresses added to
// the excluded link in a burst cost no call of changed; one added to
// another link costs one.
func TestSubscriptionSeesOtherLinksAddressesOnly(t *testing.T) {
	done := make(chan bool, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		ns, err := netns.New()
		if err != nil {
			done <- false
			return
		}
		defer ns.Close()
		defer func() { done <- true }()
		mk := func(name string) netlink.Link {
			l := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "-peer"}
			if err := netlink.LinkAdd(l); err != nil {
				t.Error(err)
			}
			return l
		}
		ex, other := mk("kube-ipvs0"), mk("eth9")
		ev, err := subscribeAddrs(1<<20, false)
		if err != nil {
			t.Error(err)
			return
		}
		defer ev.Close()
		var calls atomic.Int32
		ctx, cancel := context.WithCancel(context.Background())
		followed := make(chan error, 1)
		go func() {
			// In the namespace too, where it looks links up.
			runtime.LockOSThread()
			if err := netns.Set(ns); err != nil {
				followed <- err
				return
			}
			followed <- Netlink{Exclude: "kube-ipvs0"}.follow(ctx, ev, func() { calls.Add(1) })
		}()
		add := func(l netlink.Link, ip net.IP) {
			if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(32, 32)}}); err != nil {
				t.Error(err)
			}
		}
		for i := range 1000 {
			add(ex, net.IPv4(10, 96, byte(i>>8), byte(i)))
		}
		time.Sleep(300 * time.Millisecond)
		if got := calls.Load(); got != 0 {
			t.Errorf("1,000 addresses on the excluded link: %d calls, want 0", got)
		}
		add(other, net.IPv4(198, 51, 100, 7))
		for deadline := time.Now().Add(5 * time.Second); calls.Load() == 0 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if got := calls.Load(); got != 1 {
			t.Errorf("an address on another link: %d calls, want 1", got)
		}
		cancel()
		if err := <-followed; err != nil {
			t.Errorf("follow: %v", err)
		}
	}()
	if !<-done {
		t.Skip("cannot make a network namespace here (needs root)")
	}
}
