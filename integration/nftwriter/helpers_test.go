//go:build integration

package nftwriter

import (
	"fmt"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// bigReadBuffer lets a monitor socket hold a whole transaction's events.
func bigReadBuffer(c *netlink.Conn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	}); err != nil {
		return err
	}
	return serr
}

// repairAll runs a whole repair against what w last programmed, as the
// loop's periodic resync does, with no slice cut short.
func repairAll(w *nft.Writer) error {
	if err := w.StartRepair(); err != nil {
		return err
	}
	for {
		done, err := w.RepairStep(time.Hour, nil)
		if done || err != nil {
			return err
		}
	}
}

// rebuildTable replaces the whole table with plan's in one batch, whatever
// the kernel holds, as Resync does when its mirror is not current: it is
// the first Resync of a new writer.
func rebuildTable(plan policy.Plan) error {
	w, err := nft.NewLinux(testConfig)
	if err != nil {
		return err
	}
	if err := w.Resync(plan); err != nil {
		return err
	}
	if st := w.LastResync(); !st.Rebuilt {
		return fmt.Errorf("a new writer's first Resync did not rebuild: %+v", st)
	}
	return nil
}
