package hostaddr

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// appendEventLinks appends the link index of each address message
// (RTM_NEWADDR, RTM_DELADDR) in b, one read of the address subscription,
// to idx. Other messages are skipped; a message cut short is an error,
// never a panic.
func appendEventLinks(idx []int, b []byte) ([]int, error) {
	for len(b) > 0 {
		if len(b) < unix.NLMSG_HDRLEN {
			return idx, fmt.Errorf("address event: %d bytes left, shorter than a message header", len(b))
		}
		l := int(binary.NativeEndian.Uint32(b[0:4]))
		if l < unix.NLMSG_HDRLEN || l > len(b) {
			return idx, fmt.Errorf("address event: a message of %d bytes in %d", l, len(b))
		}
		typ := binary.NativeEndian.Uint16(b[4:6])
		body := b[unix.NLMSG_HDRLEN:l]
		if typ == unix.RTM_NEWADDR || typ == unix.RTM_DELADDR {
			if len(body) < unix.SizeofIfAddrmsg {
				return idx, fmt.Errorf("address event of %d bytes, shorter than an ifaddrmsg", len(body))
			}
			idx = append(idx, int(binary.NativeEndian.Uint32(body[4:8])))
		}
		b = b[min(len(b), (l+unix.NLMSG_ALIGNTO-1)&^(unix.NLMSG_ALIGNTO-1)):]
	}
	return idx, nil
}
