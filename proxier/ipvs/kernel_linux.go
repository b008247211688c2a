package ipvs

import (
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// netlinkKernel is the Kernel over IPVS's generic netlink family, on
// sockets of our own: dumpReader lists (svcdump.go, destdump.go),
// opWriter changes in batches (ipvsmsg.go), and the single reads and
// changes (a virtual server, the timeouts) go through the dumpReader's
// socket. github.com/moby/ipvs is not used: its first handle runs
// `modprobe -va ip_vs` and reports a failure through logrus, outside the
// proxy's logging; here a kernel without IPVS is an error naming the
// module, found by the family lookup.
type netlinkKernel struct {
	dests  *dumpReader
	ops    *opWriter
	counts *procTable
}

var _ Kernel = (*netlinkKernel)(nil)

func family(a netip.Addr) uint16 {
	if a.Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

func (m *netlinkKernel) VirtualServers() ([]VirtualServer, error) { return m.dests.virtualServers() }

func (m *netlinkKernel) VirtualServer(k Key) (VirtualServer, error) { return m.dests.virtualServer(k) }

func (m *netlinkKernel) Destinations(k Key) ([]Destination, error) {
	return m.dests.destinations(k)
}

// one makes a single change as a batch of one.
func (m *netlinkKernel) one(o Op) error { return m.ops.write([]Op{o})[0] }

func (m *netlinkKernel) AddVirtualServer(vs VirtualServer) error {
	return m.one(Op{Kind: OpAddService, VS: vs})
}

func (m *netlinkKernel) UpdateVirtualServer(vs VirtualServer) error {
	return m.one(Op{Kind: OpUpdateService, VS: vs})
}

func (m *netlinkKernel) DeleteVirtualServer(k Key) error {
	return m.one(Op{Kind: OpDeleteService, VS: VirtualServer{Key: k}})
}

func (m *netlinkKernel) AddDestination(k Key, d Destination) error {
	return m.one(Op{Kind: OpAddDestination, VS: VirtualServer{Key: k}, Dest: d})
}

func (m *netlinkKernel) UpdateDestination(k Key, d Destination) error {
	return m.one(Op{Kind: OpUpdateDestination, VS: VirtualServer{Key: k}, Dest: d})
}

func (m *netlinkKernel) DeleteDestination(k Key, d Destination) error {
	return m.one(Op{Kind: OpDeleteDestination, VS: VirtualServer{Key: k}, Dest: d})
}

func (m *netlinkKernel) Timeouts() (Timeouts, error) { return m.dests.timeouts() }

func (m *netlinkKernel) SetTimeouts(t Timeouts) error { return m.dests.setTimeouts(t) }

func (m *netlinkKernel) Close() {
	m.dests.Close()
	m.ops.Close()
	m.counts.Close()
}

// DestinationCounts implements Kernel: one read of /proc/net/ip_vs.
func (m *netlinkKernel) DestinationCounts() (map[Key]int, error) { return m.counts.counts() }

// newNetlinkKernel opens the IPVS sockets. The family lookup on the
// first is the module check: a node without ip_vs fails here, with the
// module named; the proxy loads no module itself.
func newNetlinkKernel() (*netlinkKernel, error) {
	dests, err := newDumpReader()
	if err != nil {
		return nil, fmt.Errorf("the kernel has no IPVS generic netlink family (load module ip_vs): %w", err)
	}
	if _, err := dests.timeouts(); err != nil {
		dests.Close()
		return nil, fmt.Errorf("the IPVS generic netlink family does not answer: %w", err)
	}
	ops, err := newOpWriter()
	if err != nil {
		dests.Close()
		return nil, fmt.Errorf("ipvs write socket: %w", err)
	}
	return &netlinkKernel{dests: dests, ops: ops, counts: openProcTable()}, nil
}
