package ipvs

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// netlinkLinks is Links over rtnetlink (github.com/vishvananda/netlink).
type netlinkLinks struct{}

var _ Links = netlinkLinks{}

func linkByName(name string) (netlink.Link, error) {
	l, err := netlink.LinkByName(name)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return nil, syscall.ENODEV
	}
	return l, err
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func (netlinkLinks) Link(name string) (LinkInfo, error) {
	l, err := linkByName(name)
	if err != nil {
		return LinkInfo{}, err
	}
	return LinkInfo{Index: l.Attrs().Index, Kind: l.Type()}, nil
}

func (netlinkLinks) AddDummy(name string) error {
	return netlink.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: name}})
}

func (netlinkLinks) DeleteLink(name string) error {
	l, err := linkByName(name)
	if err != nil {
		return err
	}
	return netlink.LinkDel(l)
}

func (netlinkLinks) Addrs(name string) ([]netip.Prefix, error) {
	l, err := linkByName(name)
	if err != nil {
		return nil, err
	}
	addrs, err := netlink.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return nil, err
	}
	out := make([]netip.Prefix, 0, len(addrs))
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || ip.Unmap().IsLinkLocalUnicast() {
			continue
		}
		ones, _ := a.Mask.Size()
		out = append(out, netip.PrefixFrom(ip.Unmap(), ones))
	}
	return out, nil
}

func (netlinkLinks) AddAddr(name string, p netip.Prefix) error {
	l, err := linkByName(name)
	if err != nil {
		return err
	}
	return netlink.AddrAdd(l, &netlink.Addr{IPNet: ipNet(p)})
}

func (netlinkLinks) DelAddr(name string, p netip.Prefix) error {
	l, err := linkByName(name)
	if err != nil {
		return err
	}
	return netlink.AddrDel(l, &netlink.Addr{IPNet: ipNet(p)})
}

// netlinkConntrack is Conntrack over ctnetlink.
type netlinkConntrack struct{}

var _ Conntrack = netlinkConntrack{}

// replySource matches UDP flows whose reply comes from one endpoint.
type replySource struct{ ep netip.AddrPort }

func (f replySource) MatchConntrackFlow(flow *netlink.ConntrackFlow) bool {
	if flow.Forward.Protocol != unix.IPPROTO_UDP || flow.Reverse.SrcPort != f.ep.Port() {
		return false
	}
	src, ok := netip.AddrFromSlice(flow.Reverse.SrcIP)
	return ok && src.Unmap() == f.ep.Addr()
}

func (netlinkConntrack) DeleteUDP(ep netip.AddrPort) (int, error) {
	fam := netlink.InetFamily(unix.AF_INET)
	if ep.Addr().Is6() {
		fam = unix.AF_INET6
	}
	n, err := netlink.ConntrackDeleteFilters(netlink.ConntrackTable, fam, replySource{ep})
	return int(n), err
}

// procSysctls is Sysctls over /proc/sys.
type procSysctls struct{}

var _ Sysctls = procSysctls{}

func sysctlPath(key string) string { return filepath.Join("/proc/sys", filepath.Clean("/"+key)) }

func (procSysctls) Get(key string) (string, error) {
	b, err := os.ReadFile(sysctlPath(key))
	return strings.TrimSpace(string(b)), err
}

func (procSysctls) Set(key, value string) error {
	return os.WriteFile(sysctlPath(key), []byte(value), 0o644)
}

// NewLinux returns a Writer over the running kernel: IPVS through
// github.com/moby/ipvs (which runs `modprobe -va ip_vs` once per process
// when it opens its first handle; a second handle is the Repair's
// RepairReader), the dummy interface and conntrack
// through github.com/vishvananda/netlink, sysctls through /proc/sys.
func NewLinux(cfg Config) (*Writer, error) {
	h, err := mobyipvsNew()
	if err != nil {
		return nil, err
	}
	if cfg.RepairReader == nil {
		reader, err := mobyipvsNew()
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("repair reader: %w", err)
		}
		cfg.RepairReader = reader
	}
	return New(cfg, h, netlinkLinks{}, netlinkConntrack{}, procSysctls{}), nil
}

// NewLinuxAdapters returns the running kernel's adapters, the ones
// NewLinux wires into its Writer, for tests that hold them to the fakes'
// contract (integration/ipvswriter's TestKernelContract). close releases
// the IPVS handle.
func NewLinuxAdapters() (k Kernel, l Links, ct Conntrack, sys Sysctls, close func(), err error) {
	h, err := mobyipvsNew()
	if err != nil {
		return nil, nil, nil, nil, nil, err
	}
	return h, netlinkLinks{}, netlinkConntrack{}, procSysctls{}, h.Close, nil
}
