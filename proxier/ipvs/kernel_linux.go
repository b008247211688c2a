package ipvs

import (
	"fmt"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/sysctl"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs/ipvsnl"
)

// netlinkKernel is the Kernel over IPVS's generic netlink family on
// sockets of our own (package ipvsnl, which says why not through
// github.com/moby/ipvs), and /proc/net/ip_vs for the destination counts.
type netlinkKernel struct {
	*ipvsnl.Conn
	counts *procTable
}

var _ Kernel = (*netlinkKernel)(nil)

func (m *netlinkKernel) Close() {
	m.Conn.Close()
	m.counts.Close()
}

// DestinationCounts implements Kernel: one read of /proc/net/ip_vs.
func (m *netlinkKernel) DestinationCounts() (map[Key]int, error) { return m.counts.counts() }

// newNetlinkKernel opens the IPVS sockets (ipvsnl.Open: the module
// check) and the /proc table.
func newNetlinkKernel() (*netlinkKernel, error) {
	c, err := ipvsnl.Open()
	if err != nil {
		return nil, err
	}
	return &netlinkKernel{Conn: c, counts: openProcTable()}, nil
}

// NewLinux returns a Writer over the running kernel: IPVS through its
// generic netlink family on sockets of our own (a second set is the
// Repair's RepairReader; nothing is loaded or exec'd: a node without
// ip_vs is an error naming the module), the dummy interface through
// github.com/vishvananda/netlink, sysctls through /proc/sys.
func NewLinux(cfg Config) (*Writer, error) {
	if cfg.KernelRelease == "" {
		rel, err := (sysctl.Host{}).Read(sysctl.Path("kernel/osrelease"))
		if err != nil {
			return nil, fmt.Errorf("read the kernel release: %w", err)
		}
		cfg.KernelRelease = rel
	}
	k, l, sys, closeAll, err := NewLinuxAdapters()
	if err != nil {
		return nil, err
	}
	if cfg.RepairReader == nil {
		reader, err := newNetlinkKernel()
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("repair reader: %w", err)
		}
		cfg.RepairReader = reader
	}
	return New(cfg, k, l, sys), nil
}

// NewLinuxAdapters opens the running kernel's adapters, the ones NewLinux
// wires into its Writer: the IPVS handle, the links' rtnetlink handle
// and /proc/sys. Tests of the kernel hold them to the fakes'
// contract. close releases the handles.
func NewLinuxAdapters() (k Kernel, l Links, sys sysctl.Files, close func(), err error) {
	links, err := newNetlinkLinks()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	h, err := newNetlinkKernel()
	if err != nil {
		links.Close()
		return nil, nil, nil, nil, err
	}
	return h, links, sysctl.Host{}, func() { h.Close(); links.Close() }, nil
}
