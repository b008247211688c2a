package ipvs

import (
	"fmt"
	"net"
	"net/netip"

	mobyipvs "github.com/moby/ipvs"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlfamily"
)

// mobyKernel is the Kernel over github.com/moby/ipvs (generic netlink),
// but for VirtualServers and Destinations, which a dumpReader lists, and
// Write, which an opWriter sends in batches. The single-change methods stay moby's: the
// Writer changes IPVS through Write only, and they are the
// one-request-per-op path Write is measured against.
type mobyKernel struct {
	h      *mobyipvs.Handle
	dests  *dumpReader
	ops    *opWriter
	counts *procTable
}

var _ Kernel = (*mobyKernel)(nil)

func family(a netip.Addr) uint16 {
	if a.Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

// mobyService is the moby form of a key or virtual server. The netmask is
// kube-proxy's: /32 or /128 (only used by persistence).
func mobyService(vs VirtualServer) *mobyipvs.Service {
	proto, _ := vs.Protocol.Number() // 0, which the kernel refuses, for another protocol
	s := &mobyipvs.Service{
		Address:       net.IP(vs.Address.AsSlice()),
		Protocol:      uint16(proto),
		Port:          vs.Port,
		SchedName:     vs.Scheduler,
		Flags:         vs.Flags,
		Timeout:       vs.Timeout,
		AddressFamily: family(vs.Address),
		Netmask:       0xffffffff,
	}
	if vs.Address.Is6() {
		s.Netmask = 128
	}
	return s
}

func mobyDestination(d Destination) *mobyipvs.Destination {
	return &mobyipvs.Destination{
		Address:         net.IP(d.Addr.AsSlice()),
		Port:            d.Port,
		Weight:          int(d.Weight),
		ConnectionFlags: uint32(d.Forward),
		AddressFamily:   family(d.Addr),
	}
}

func (m *mobyKernel) VirtualServers() ([]VirtualServer, error) { return m.dests.virtualServers() }

// virtualServerOf converts an address-based virtual server; false for a
// firewall-mark one (never ours) or one of an unknown protocol.
func virtualServerOf(s *mobyipvs.Service) (VirtualServer, bool) {
	if s.FWMark != 0 {
		return VirtualServer{}, false
	}
	addr, ok := netip.AddrFromSlice(s.Address)
	proto, known := protocolOf(s.Protocol)
	if !ok || !known {
		return VirtualServer{}, false
	}
	return VirtualServer{
		Key:       Key{Address: addr.Unmap(), Protocol: proto, Port: s.Port},
		Scheduler: s.SchedName,
		Flags:     s.Flags &^ FlagHashed,
		Timeout:   s.Timeout,
	}, true
}

func (m *mobyKernel) VirtualServer(k Key) (VirtualServer, error) {
	s, err := m.h.GetService(mobyService(VirtualServer{Key: k}))
	if err != nil {
		return VirtualServer{}, err
	}
	vs, ok := virtualServerOf(s)
	if !ok {
		return VirtualServer{}, fmt.Errorf("virtual server %s: the kernel answered with another (%v:%d proto %d)", k, s.Address, s.Port, s.Protocol)
	}
	return vs, nil
}

func (m *mobyKernel) Destinations(k Key) ([]Destination, error) {
	return m.dests.destinations(k)
}

func (m *mobyKernel) AddVirtualServer(vs VirtualServer) error {
	return m.h.NewService(mobyService(vs))
}

func (m *mobyKernel) UpdateVirtualServer(vs VirtualServer) error {
	return m.h.UpdateService(mobyService(vs))
}

func (m *mobyKernel) DeleteVirtualServer(k Key) error {
	return m.h.DelService(mobyService(VirtualServer{Key: k}))
}

func (m *mobyKernel) AddDestination(k Key, d Destination) error {
	return m.h.NewDestination(mobyService(VirtualServer{Key: k}), mobyDestination(d))
}

func (m *mobyKernel) UpdateDestination(k Key, d Destination) error {
	return m.h.UpdateDestination(mobyService(VirtualServer{Key: k}), mobyDestination(d))
}

func (m *mobyKernel) DeleteDestination(k Key, d Destination) error {
	return m.h.DelDestination(mobyService(VirtualServer{Key: k}), mobyDestination(d))
}

func (m *mobyKernel) Timeouts() (Timeouts, error) {
	c, err := m.h.GetConfig()
	if err != nil {
		return Timeouts{}, err
	}
	return Timeouts{TCP: c.TimeoutTCP, TCPFin: c.TimeoutTCPFin, UDP: c.TimeoutUDP}, nil
}

func (m *mobyKernel) SetTimeouts(t Timeouts) error {
	return m.h.SetConfig(&mobyipvs.Config{TimeoutTCP: t.TCP, TimeoutTCPFin: t.TCPFin, TimeoutUDP: t.UDP})
}

func (m *mobyKernel) Close() {
	m.h.Close()
	m.dests.Close()
	m.ops.Close()
	m.counts.Close()
}

// DestinationCounts implements Kernel: one read of /proc/net/ip_vs.
func (m *mobyKernel) DestinationCounts() (map[Key]int, error) { return m.counts.counts() }

func mobyipvsNew() (*mobyKernel, error) {
	h, err := mobyipvs.New("")
	if err != nil {
		return nil, nlfamily.Error("ipvs", unix.NETLINK_GENERIC, err)
	}
	// moby/ipvs resolves the IPVS generic netlink family once and only
	// logs a failure, after which its handle panics on the first
	// request; so the family is looked up on our own socket (after
	// mobyipvs.New, which loads the module) before moby is asked
	// anything, and a node without ip_vs fails here with the module
	// named.
	dests, err := newDumpReader()
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("the kernel has no IPVS generic netlink family (load module ip_vs): %w", err)
	}
	if _, err := h.GetConfig(); err != nil {
		h.Close()
		dests.Close()
		return nil, fmt.Errorf("the IPVS generic netlink family does not answer: %w", err)
	}
	ops, err := newOpWriter()
	if err != nil {
		h.Close()
		dests.Close()
		return nil, fmt.Errorf("ipvs write socket: %w", err)
	}
	return &mobyKernel{h: h, dests: dests, ops: ops, counts: openProcTable()}, nil
}
