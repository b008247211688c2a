package hostaddr

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/netlinkdump"
)

// Netlink reads the host's addresses over rtnetlink.
type Netlink struct {
	// Exclude is the dummy interface whose addresses are not node
	// addresses (--ipvs-interface, kube-ipvs0).
	Exclude string
}

// List returns the host's usable addresses (see Select): two netlink
// dumps (links, then every address), whatever the number of links, since
// it runs on every address event and pods come and go. Dumps the kernel
// reports as interrupted are redone (netlinkdump.Redo): giving up on the
// first, as when the IPVS writer adds thousands of VIPs at a cold start,
// would lose the node-address change that asked for the List.
func (n Netlink) List() ([]netip.Addr, error) { return netlinkdump.Redo(n.list) }

func (n Netlink) list() ([]netip.Addr, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	names := make(map[int]string, len(links))
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("list addresses: %w", err)
	}
	all := make([]Addr, 0, len(addrs))
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			all = append(all, Addr{Link: names[a.LinkIndex], IP: ip})
		}
	}
	return Select(all, n.Exclude), nil
}

// subscriptionBuffer is the address subscription's socket receive
// buffer. The IPVS writer adds an address per service VIP, thousands in
// a few seconds at a cold start, each event held in the kernel's buffer
// until the reader takes it. Beside busy CPUs such a burst can overflow
// the default buffer: the subscription ends (ENOBUFS), and its renewal
// asks for a List of every address while the adds go on
// (TestWatchKeepsItsSubscriptionThroughABurst). This size holds the
// whole burst of a large node unread.
const subscriptionBuffer = 16 << 20

// Watch calls changed after every address change, until ctx ends. A
// broken subscription is renewed after a second, and changed is called
// then too, since events may have been missed. The subscription's buffer
// is subscriptionBuffer, forced past rmem_max (CAP_NET_ADMIN); without
// the capability, the largest rmem_max allows.
func (n Netlink) Watch(ctx context.Context, changed func()) {
	logger := klog.FromContext(ctx)
	force := true
	for ctx.Err() == nil {
		updates := make(chan netlink.AddrUpdate, 64)
		done := make(chan struct{})
		opts := netlink.AddrSubscribeOptions{
			ErrorCallback:          func(err error) { logger.V(2).Info("Address subscription error", "err", err) },
			ReceiveBufferSize:      subscriptionBuffer,
			ReceiveBufferForceSize: force,
		}
		err := netlink.AddrSubscribeWithOptions(updates, done, opts)
		if force && errors.Is(err, unix.EPERM) {
			// Once per Watch: the failed attempt's socket is not
			// closed by the library.
			logger.Info("Cannot force the address subscription's buffer past rmem_max; using rmem_max", "want", subscriptionBuffer, "err", err)
			force, opts.ReceiveBufferForceSize = false, false
			err = netlink.AddrSubscribeWithOptions(updates, done, opts)
		}
		if err != nil {
			logger.Error(err, "Cannot subscribe to address changes; retrying")
		} else {
			changed() // whatever happened before the subscription
			n.drain(ctx, updates, changed)
		}
		close(done)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// drain calls changed for the updates until the channel closes or ctx
// ends. A burst of updates costs one call: those already queued when one
// arrives are taken with it. Updates of the excluded interface's
// addresses are dropped: the IPVS writer adds one per service VIP (a
// cold start makes thousands), none is a node
// address, and each would otherwise cost a List of every address.
func (n Netlink) drain(ctx context.Context, updates <-chan netlink.AddrUpdate, changed func()) {
	var ex excluded
	for {
		select {
		case <-ctx.Done():
			return
		case u, ok := <-updates:
			if !ok {
				return
			}
			relevant := !n.isExcluded(&ex, u.LinkIndex)
			for queued := true; queued; {
				select {
				case u, ok := <-updates:
					if !ok {
						if relevant {
							changed()
						}
						return
					}
					relevant = relevant || !n.isExcluded(&ex, u.LinkIndex)
				default:
					queued = false
				}
			}
			if relevant {
				changed()
			}
		}
	}
}

// excluded remembers the excluded interface's index, and when it was
// last seen to be that interface's.
type excluded struct {
	index   int
	checked time.Time
}

// excludedRecheck bounds how long an index is trusted to still be the
// excluded interface's. The kernel does not hand a deleted link's index
// to a new one soon (indexes grow), so this is a safety margin only.
const excludedRecheck = 10 * time.Second

// isExcluded reports whether index is the excluded interface's, asking
// the kernel when it is not the one remembered or that one is old.
func (n Netlink) isExcluded(ex *excluded, index int) bool {
	if n.Exclude == "" || index <= 0 {
		return false
	}
	now := time.Now()
	if index == ex.index && now.Sub(ex.checked) < excludedRecheck {
		return true
	}
	l, err := netlink.LinkByIndex(index)
	if err != nil || l.Attrs().Name != n.Exclude {
		return false
	}
	ex.index, ex.checked = index, now
	return true
}
