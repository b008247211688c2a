package nlsock

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlfamily"
)

// Open opens a blocking netlink socket of protocol proto for what (named
// in its errors), bound and with reads bounded by timeout, so that a
// kernel that never answers is an error, not a reader stuck for good.
func Open(proto int, what string, timeout time.Duration) (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return -1, nlfamily.Error(what, proto, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind a %s netlink socket for %s: %w", nlfamily.Name(proto), what, err)
	}
	tv := unix.NsecToTimeval(timeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("set the read timeout of a %s netlink socket for %s: %w", nlfamily.Name(proto), what, err)
	}
	return fd, nil
}
