//go:build integration

package nftwriter

import (
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
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
