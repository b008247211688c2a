package hostaddr

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// addrEvents is a route netlink socket joined to the IPv4 and IPv6
// address groups: the kernel sends it a message for each address added
// to or removed from any link. It reads on a blocking socket into one
// buffer it keeps, and reads only each message's link index.
// vishvananda/netlink's subscription, which the watch used before,
// allocated and zeroed a 64 KiB buffer per read and decoded every
// message into an AddrUpdate: at a cold start of 10,000 services the
// dummy interface's 10,000 new addresses cost 1.7 CPU-s only to be
// dropped (BENCHMARKS.md).
type addrEvents struct {
	fd  int
	buf []byte
}

// eventWait bounds a blocking read, so that the watch sees its context
// end within it.
const eventWait = time.Second

// eventReadBuffer holds the largest read: the kernel sends each event on
// its own, a few dozen bytes.
const eventReadBuffer = 16 << 10

// subscribeAddrs opens the subscription with a receive buffer of size
// bytes, forced past net.core.rmem_max when force is set (which needs
// CAP_NET_ADMIN: EPERM otherwise).
func subscribeAddrs(size int, force bool) (*addrEvents, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("open a route netlink socket: %w", err)
	}
	fail := func(what string, err error) (*addrEvents, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("address subscription: %s: %w", what, err)
	}
	opt := unix.SO_RCVBUF
	if force {
		opt = unix.SO_RCVBUFFORCE
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, size); err != nil {
		return fail(fmt.Sprintf("a receive buffer of %d bytes", size), err)
	}
	tv := unix.NsecToTimeval(eventWait.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fail("read timeout", err)
	}
	groups := uint32(unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: groups}); err != nil {
		return fail("join the address groups", err)
	}
	return &addrEvents{fd: fd, buf: make([]byte, eventReadBuffer)}, nil
}

// read takes one read of events and appends the link index of each
// address message in it to idx. With wait it blocks for up to eventWait;
// without, it takes only what is queued. got is false when nothing came.
// ENOBUFS means the kernel dropped events: the subscription is then of
// no further use.
func (e *addrEvents) read(idx []int, wait bool) (_ []int, got bool, err error) {
	flags := 0
	if !wait {
		flags = unix.MSG_DONTWAIT
	}
	for {
		n, _, err := unix.Recvfrom(e.fd, e.buf, flags)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return idx, false, nil
		case err != nil:
			return idx, false, fmt.Errorf("read address events: %w", err)
		}
		idx, err = appendEventLinks(idx, e.buf[:n])
		return idx, true, err
	}
}

func (e *addrEvents) Close() { unix.Close(e.fd) }
