//go:build integration

package labnet

import (
	"errors"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
)

// ChurnAddress adds p to link and deletes it again, over and over,
// pausing pause after each change, until the returned stop is called;
// stop returns how many changes were made. Beside it, a dump of the
// namespace's addresses that spans several messages may come back marked
// interrupted (NLM_F_DUMP_INTR), as beside the IPVS writer adding VIPs.
func ChurnAddress(link netlink.Link, p netip.Prefix, pause time.Duration) (stop func() int) {
	quit, made := make(chan struct{}), make(chan int)
	a := &netlink.Addr{IPNet: IPNet(p)}
	go func() {
		n := 0
		for {
			select {
			case <-quit:
				made <- n
				return
			default:
			}
			_ = netlink.AddrAdd(link, a)
			time.Sleep(pause)
			_ = netlink.AddrDel(link, a)
			time.Sleep(pause)
			n += 2
		}
	}()
	return func() int { close(quit); return <-made }
}

// InterruptedDump reports whether one dump of every address of the
// namespace, not redone, comes back marked interrupted: a test beside
// ChurnAddress counts them to show that its churn interrupts dumps.
func InterruptedDump() bool {
	_, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	return errors.Is(err, netlink.ErrDumpInterrupted)
}
