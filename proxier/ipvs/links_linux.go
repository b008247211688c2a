package ipvs

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/netlinkdump"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlfamily"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs/ipvsnl"
)

// netlinkLinks is Links over rtnetlink (github.com/vishvananda/netlink),
// on one handle whose sockets are reused (the package's functions open
// a socket per request), with the last link looked up by name cached:
// a cold start adds an address per service VIP, and looking the dummy
// interface up before each one doubled the requests. A cached link that
// was deleted answers ENODEV (the kernel never hands its index to
// another link: indexes only grow), and is then looked up again once.
//
// Many addresses at once (AddAddrs, DelAddrs) go in batches on a route
// netlink socket of their own (ipvsnl.AddrConn), opened with the handle,
// in the same network namespace, and Addrs dumps them there.
type netlinkLinks struct {
	h *netlink.Handle

	mu     sync.Mutex
	cached netlink.Link // by its name; nil when none

	// addrMu serializes addrs; Addrs' result is valid until the next
	// call (the Writer's lock orders them).
	addrMu sync.Mutex
	addrs  *ipvsnl.AddrConn
}

var _ Links = (*netlinkLinks)(nil)

// newNetlinkLinks opens the handle on NETLINK_ROUTE only: without
// arguments netlink.NewHandle opens XFRM and netfilter sockets too, and a
// node that cannot load xfrm_user would stop the proxy at start.
func newNetlinkLinks() (*netlinkLinks, error) {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, nlfamily.Error("dummy interface handle", unix.NETLINK_ROUTE, err)
	}
	a, err := ipvsnl.OpenAddrs("dummy interface addresses")
	if err != nil {
		h.Close()
		return nil, err
	}
	return &netlinkLinks{h: h, addrs: a}, nil
}

// Close releases the handle's sockets and the batches' one.
func (l *netlinkLinks) Close() {
	l.h.Close()
	l.addrs.Close()
}

func (l *netlinkLinks) linkByName(name string) (netlink.Link, error) {
	lk, err := l.h.LinkByName(name)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return nil, syscall.ENODEV
	}
	return lk, err
}

// onLink runs fn on the link named name: the cached one if it has that
// name, and looked up again if fn finds it gone (ENODEV).
func (l *netlinkLinks) onLink(name string, fn func(netlink.Link) error) error {
	l.mu.Lock()
	lk := l.cached
	l.mu.Unlock()
	if lk != nil && lk.Attrs().Name == name {
		err := fn(lk)
		if !errors.Is(err, syscall.ENODEV) {
			return err
		}
	}
	lk, err := l.linkByName(name)
	l.mu.Lock()
	l.cached = lk
	l.mu.Unlock()
	if err != nil {
		return err
	}
	return fn(lk)
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func (l *netlinkLinks) Link(name string) (LinkInfo, error) {
	lk, err := l.linkByName(name)
	l.mu.Lock()
	l.cached = lk
	l.mu.Unlock()
	if err != nil {
		return LinkInfo{}, err
	}
	return LinkInfo{Index: lk.Attrs().Index, Kind: lk.Type(), Alias: lk.Attrs().Alias}, nil
}

// AddDummy creates the link, then sets its alias: the kernel ignores
// IFLA_IFALIAS in a request that creates a link. A link whose alias
// cannot be set is deleted again, so that none is left that a later
// start would refuse as foreign.
func (l *netlinkLinks) AddDummy(name string) error {
	lk := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: name}}
	if err := l.h.LinkAdd(lk); err != nil {
		return err
	}
	if err := l.h.LinkSetAlias(lk, LinkAlias); err != nil {
		return errors.Join(fmt.Errorf("set alias of link %s: %w", name, err), l.h.LinkDel(lk))
	}
	return nil
}

func (l *netlinkLinks) DeleteLink(name string) error {
	lk, err := l.linkByName(name)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.cached = nil
	l.mu.Unlock()
	return l.h.LinkDel(lk)
}

// Addrs lists the addresses of the link named name, with one dump of
// the namespace's addresses on the batch socket (ipvsnl.AddrConn.List): the check reads them
// every few seconds, and vishvananda/netlink's AddrList (which the
// proxy used before) allocated a netlink.Addr and copies of every
// attribute per address: at 10,000 services, an eighth of what the
// proxy allocated after its cold start (benchmarks/NOTES.md).
// A dump the kernel marks as interrupted (an address of the namespace
// changed while it ran) is redone (netlinkdump.Redo) instead of failing
// the sync. IPv6 link-local addresses are left out.
func (l *netlinkLinks) Addrs(name string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	err := l.onLink(name, func(lk netlink.Link) (err error) {
		out, err = netlinkdump.Redo(func() ([]netip.Prefix, error) { return l.dumpAddrs(lk.Attrs().Index) })
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// dumpAddrs dumps the namespace's addresses and keeps those of the link
// of index index.
func (l *netlinkLinks) dumpAddrs(index int) ([]netip.Prefix, error) {
	l.addrMu.Lock()
	defer l.addrMu.Unlock()
	out, err := l.addrs.List(index)
	if errors.Is(err, ipvsnl.ErrDumpInterrupted) {
		return nil, fmt.Errorf("%w: %w", netlink.ErrDumpInterrupted, err)
	}
	return out, err
}

func (l *netlinkLinks) AddAddr(name string, p netip.Prefix) error {
	return l.onLink(name, func(lk netlink.Link) error { return l.h.AddrAdd(lk, &netlink.Addr{IPNet: ipNet(p)}) })
}

func (l *netlinkLinks) DelAddr(name string, p netip.Prefix) error {
	return l.onLink(name, func(lk netlink.Link) error { return l.h.AddrDel(lk, &netlink.Addr{IPNet: ipNet(p)}) })
}

func (l *netlinkLinks) AddAddrs(name string, ps []netip.Prefix) []error {
	return l.changeAddrs(name, true, ps)
}

func (l *netlinkLinks) DelAddrs(name string, ps []netip.Prefix) []error {
	return l.changeAddrs(name, false, ps)
}

// changeAddrs adds (add) or deletes ps on the link named name in
// batches. A cached link that was deleted fails every request with
// ENODEV: onLink then looks it up again and the batch is sent once more.
func (l *netlinkLinks) changeAddrs(name string, add bool, ps []netip.Prefix) []error {
	errs := make([]error, len(ps))
	if len(ps) == 0 {
		return errs
	}
	l.addrMu.Lock()
	defer l.addrMu.Unlock()
	err := l.onLink(name, func(lk netlink.Link) error {
		errs = l.addrs.Change(add, lk.Attrs().Index, ps)
		for _, err := range errs {
			if !errors.Is(err, syscall.ENODEV) {
				return nil
			}
		}
		return syscall.ENODEV
	})
	if err != nil {
		return fill(errs, err)
	}
	return errs
}

// fill sets every element of errs to err.
func fill(errs []error, err error) []error {
	for i := range errs {
		errs[i] = err
	}
	return errs
}
