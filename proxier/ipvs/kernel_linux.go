package ipvs

import "github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs/ipvsnl"

// netlinkKernel is the Kernel over IPVS's generic netlink family on
// sockets of our own (package ipvsnl, which says why not through
// github.com/moby/ipvs), and /proc/net/ip_vs for the destination counts.
type netlinkKernel struct {
	*ipvsnl.Conn
	counts *procTable
}

var _ Kernel = (*netlinkKernel)(nil)

// one makes a single change as a batch of one.
func (m *netlinkKernel) one(o Op) error { return m.Write([]Op{o})[0] }

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
