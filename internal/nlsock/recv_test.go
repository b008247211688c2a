package nlsock

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRecvReadsOneDatagramWithItsWholeLength: Recv reads a datagram, and
// one larger than the buffer reports its whole length (MSG_TRUNC), as
// the netlink readers expect; an empty socket read without waiting is
// EAGAIN; a read allocates nothing.
func TestRecvReadsOneDatagramWithItsWholeLength(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	send := func(b []byte) {
		if _, err := unix.Write(fds[0], b); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 4)
	send([]byte("abc"))
	if n, err := Recv(fds[1], buf, 0); err != nil || n != 3 || string(buf[:n]) != "abc" {
		t.Errorf("Recv: %d %q %v, want 3 \"abc\"", n, buf[:min(n, len(buf))], err)
	}
	send([]byte("abcdefgh"))
	if n, err := Recv(fds[1], buf, 0); err != nil || n != 8 {
		t.Errorf("Recv of 8 bytes into 4: %d %v, want the whole length 8", n, err)
	}
	if _, err := Recv(fds[1], buf, unix.MSG_DONTWAIT); !errors.Is(err, unix.EAGAIN) {
		t.Errorf("Recv on an empty socket: %v, want EAGAIN", err)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		send([]byte("abc"))
		_, _ = Recv(fds[1], buf, 0)
	}); allocs != 0 {
		t.Errorf("a send and a Recv allocate %v times", allocs)
	}
}
