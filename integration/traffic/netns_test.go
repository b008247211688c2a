//go:build integration

package traffic

import (
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// host is one network namespace of the lab: a node, a pod or a client.
// The root namespace is node-a itself.
//
// Every non-root host owns a worker goroutine whose OS thread created the
// namespace and stays locked in it; do runs functions on that thread, so
// sockets created there belong to the host. The thread is never unlocked:
// when the worker ends (close), the runtime discards it.
type host struct {
	name string
	v4   netip.Addr // the host's own IPv4 address (node, pod or client address)
	v6   netip.Addr // the host's own IPv6 address
	node string     // for pods, the node they run on; for nodes, their own name
	root bool
	ns   netns.NsHandle
	work chan func()
}

func (h *host) String() string { return h.name }

// newHost creates a fresh, unnamed network namespace with its worker.
func newHost(name string) (*host, error) {
	h := &host{name: name, work: make(chan func())}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends up in the new netns
		ns, err := netns.New()
		if err != nil {
			ready <- fmt.Errorf("new netns for %s: %w", name, err)
			return
		}
		h.ns = ns
		ready <- nil
		for fn := range h.work {
			fn()
		}
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return h, nil
}

// rootHost is the root namespace, node-a. Its functions run on the
// caller's goroutine: no thread of this process outside a worker ever
// leaves the root namespace.
func rootHost(name string) (*host, error) {
	ns, err := netns.Get()
	if err != nil {
		return nil, fmt.Errorf("root netns: %w", err)
	}
	return &host{name: name, node: name, root: true, ns: ns}, nil
}

// do runs fn inside the host's namespace and returns its error. Sockets
// created by fn stay in the namespace after fn returns.
func (h *host) do(fn func() error) error {
	if h.root {
		return fn()
	}
	errc := make(chan error, 1)
	h.work <- func() { errc <- fn() }
	return <-errc
}

// close ends the worker (its thread is discarded) and releases the
// namespace handle; the kernel frees the namespace once nothing else
// (sockets, links' peers) holds it.
func (h *host) close() {
	if !h.root {
		close(h.work)
	}
	_ = h.ns.Close()
}

// netlink returns a NETLINK_ROUTE handle bound to the host's namespace
// (only that family: others need modules the lab may not load).
func (h *host) netlink() (*netlink.Handle, error) {
	nh, err := netlink.NewHandleAt(h.ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("%s: netlink handle: %w", h.name, err)
	}
	return nh, nil
}

// sysctl writes /proc/sys/<key> (slash-separated) inside the host's
// namespace: the per-netns net.* tree is the opening thread's.
func (h *host) sysctl(key, value string) error {
	return h.do(func() error {
		if err := os.WriteFile("/proc/sys/"+key, []byte(value), 0o644); err != nil {
			return fmt.Errorf("%s: sysctl %s=%s: %w", h.name, key, value, err)
		}
		return nil
	})
}

// readSysctl reads /proc/sys/<key> inside the host's namespace.
func (h *host) readSysctl(key string) (string, error) {
	var v string
	err := h.do(func() error {
		b, err := os.ReadFile("/proc/sys/" + key)
		v = strings.TrimSpace(string(b))
		return err
	})
	return v, err
}

// routerSysctls makes a namespace forward IPv4 and IPv6 with no reverse
// path filtering (pods' replies may come back on another link than the
// one their requests left on).
func routerSysctls(h *host) error {
	for _, kv := range [][2]string{
		{"net/ipv4/ip_forward", "1"},
		{"net/ipv6/conf/all/forwarding", "1"},
		{"net/ipv4/conf/all/rp_filter", "0"},
		{"net/ipv4/conf/default/rp_filter", "0"},
	} {
		if err := h.sysctl(kv[0], kv[1]); err != nil {
			return err
		}
	}
	return nil
}
