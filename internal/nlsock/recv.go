package nlsock

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Recv reads one datagram from fd into b with flags and MSG_TRUNC, and
// returns its whole length, which is more than len(b) when it did not
// fit. An interrupted read (EINTR) is made again. b must not be empty.
func Recv(fd int, b []byte, flags int) (int, error) {
	for {
		n, _, e := unix.Syscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
			uintptr(flags|unix.MSG_TRUNC), 0, 0)
		switch {
		case e == unix.EINTR:
			continue
		case e != 0:
			return 0, e
		}
		return int(n), nil
	}
}
