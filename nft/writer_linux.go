package nft

import (
	"fmt"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlfamily"
)

// socketBufferBytes sizes the netlink socket's send and receive buffers. A
// batch goes out in one sendmsg, which fails with EMSGSIZE beyond the send
// buffer (212992 bytes by default): 32 MiB holds about a million
// elements. The receive buffer holds the kernel's acknowledgements.
const socketBufferBytes = 32 << 20

// NewLinux returns a writer programming the running kernel over netlink
// (NETLINK_NETFILTER, as root or with CAP_NET_ADMIN). Its set element
// reads keep a socket of their own, opened at the first read.
func NewLinux(cfg Config) (*Writer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c, err := nftables.New(nftables.WithSockOptions(largeBuffers))
	if err != nil {
		return nil, nlfamily.Error("nftables", unix.NETLINK_NETFILTER, err)
	}
	rules, err := NewRuleReader()
	if err != nil {
		return nil, nlfamily.Error("nftables", unix.NETLINK_NETFILTER, err)
	}
	return New(cfg, &linuxConn{Conn: c, rules: rules, elems: newElementReader()}), nil
}

// largeBuffers raises the socket buffers with SO_SNDBUFFORCE and
// SO_RCVBUFFORCE, which ignore the wmem_max/rmem_max caps (CAP_NET_ADMIN).
func largeBuffers(c *netlink.Conn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		for _, opt := range []int{unix.SO_SNDBUFFORCE, unix.SO_RCVBUFFORCE} {
			if e := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, opt, socketBufferBytes); e != nil && serr == nil {
				serr = e
			}
		}
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("netlink socket buffers: %w", err)
	}
	return nil
}

// HostForwardDrops is ForwardDrops on the running kernel (CAP_NET_ADMIN).
func HostForwardDrops() ([]ForwardDrop, error) {
	c, err := nftables.New()
	if err != nil {
		return nil, nlfamily.Error("nftables", unix.NETLINK_NETFILTER, err)
	}
	return ForwardDrops(c)
}
