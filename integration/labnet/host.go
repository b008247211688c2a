//go:build integration

package labnet

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Host is one network namespace of the lab: a node, a pod or a client.
//
// A non-root Host owns a worker goroutine whose OS thread created the
// namespace and stays locked in it; Do runs functions on that thread, so
// sockets created there belong to the Host. The thread is never
// unlocked: when the worker ends (Close), the runtime discards it, and
// no other goroutine ever runs in the namespace.
//
// The root Host (RootHost) and a nil *Host stand for the caller's own
// namespace, the root one in the lab: Do runs fn on the calling
// goroutine.
type Host struct {
	Name string
	root bool
	ns   netns.NsHandle
	work chan func()
}

// NewHost creates a fresh, unnamed network namespace with its worker.
func NewHost(name string) (*Host, error) {
	h := &Host{Name: name, work: make(chan func())}
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

// RootHost is the caller's namespace, under a name; it holds a handle
// to it (for Netlink) that Close releases.
func RootHost(name string) (*Host, error) {
	ns, err := netns.Get()
	if err != nil {
		return nil, fmt.Errorf("root netns: %w", err)
	}
	return &Host{Name: name, root: true, ns: ns}, nil
}

func (h *Host) String() string {
	if h == nil {
		return "root"
	}
	return h.Name
}

// IsRoot reports whether h is the caller's namespace.
func (h *Host) IsRoot() bool { return h == nil || h.root }

// Do runs fn inside the host's namespace and returns its error. Sockets
// created by fn stay in the namespace after fn returns, and can be used
// from any goroutine.
func (h *Host) Do(fn func() error) error {
	if h.IsRoot() {
		return fn()
	}
	errc := make(chan error, 1)
	h.work <- func() { errc <- fn() }
	return <-errc
}

// Close ends the worker (its thread is discarded) and releases the
// namespace handle; the kernel frees the namespace once nothing else
// (sockets, links' peers) holds it.
func (h *Host) Close() {
	if h == nil {
		return
	}
	if !h.root {
		close(h.work)
	}
	_ = h.ns.Close()
}

// Netlink returns a NETLINK_ROUTE handle bound to the host's namespace
// (only that family: others need modules the lab may not load). The
// caller closes it.
func (h *Host) Netlink() (*netlink.Handle, error) {
	var nh *netlink.Handle
	var err error
	if h == nil {
		nh, err = netlink.NewHandle(unix.NETLINK_ROUTE)
	} else {
		nh, err = netlink.NewHandleAt(h.ns, unix.NETLINK_ROUTE)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: netlink handle: %w", h, err)
	}
	return nh, nil
}

// Sysctl writes /proc/sys/<key> (slash-separated) inside the host's
// namespace: the per-netns net.* tree is the opening thread's.
func (h *Host) Sysctl(key, value string) error {
	return h.Do(func() error {
		if err := os.WriteFile("/proc/sys/"+key, []byte(value), 0o644); err != nil {
			return fmt.Errorf("%s: sysctl %s=%s: %w", h, key, value, err)
		}
		return nil
	})
}

// ReadSysctl reads /proc/sys/<key> inside the host's namespace.
func (h *Host) ReadSysctl(key string) (string, error) {
	var v string
	err := h.Do(func() error {
		b, err := os.ReadFile("/proc/sys/" + key)
		if err != nil {
			return fmt.Errorf("%s: read sysctl %s: %w", h, key, err)
		}
		v = strings.TrimSpace(string(b))
		return nil
	})
	return v, err
}

// RouterSysctls make a namespace forward IPv4 and IPv6 with no reverse
// path filtering (replies may come back on another link than the one
// their requests left on).
var RouterSysctls = [][2]string{
	{"net/ipv4/ip_forward", "1"},
	{"net/ipv6/conf/all/forwarding", "1"},
	{"net/ipv4/conf/all/rp_filter", "0"},
	{"net/ipv4/conf/default/rp_filter", "0"},
}

// EnableRouting sets RouterSysctls in h.
func (h *Host) EnableRouting() error {
	for _, kv := range RouterSysctls {
		if err := h.Sysctl(kv[0], kv[1]); err != nil {
			return err
		}
	}
	return nil
}

// SetSysctl sets a sysctl in h and restores its old value when the test
// ends.
func SetSysctl(t testing.TB, h *Host, key, value string) {
	t.Helper()
	old, err := h.ReadSysctl(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Sysctl(key, value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Sysctl(key, old) })
}
