package leftovers

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Host is the node's kernel: nftables for the chains, netlink for the
// ipsets, /proc for the legacy tables.
type Host struct {
	Proc string // /proc, unless a test says otherwise
	Sys  string // /sys, likewise
}

// RemoveFromHost runs Remove against the running kernel.
func RemoveFromHost() (Result, error) {
	h := Host{Proc: "/proc", Sys: "/sys"}
	conn, err := nftables.New()
	if err != nil {
		return Result{}, fmt.Errorf("open nftables: %w", err)
	}
	defer conn.CloseLasting()
	return Remove(conn, h, h)
}

// Loaded says whether the ip_set module is loaded (or built in): a
// netlink request for the ipset subsystem would load it.
func (h Host) Loaded() bool {
	_, err := os.Stat(h.Sys + "/module/ip_set")
	return err == nil
}

// The ipset netlink protocol (include/uapi/linux/netfilter/ipset/ip_set.h).
const (
	nfnlSubsysIPSet   = 6
	ipsetCmdDestroy   = 3
	ipsetAttrProtocol = 1
	ipsetAttrSetName  = 2
	// ipsetProtocol 6 is accepted by every kernel since ipset's protocol
	// 7 came (its minimum is 6) and by the older ones.
	ipsetProtocol = 6
	// ipsetErrBusy: "in use by a kernel component" (IPSET_ERR_BUSY).
	ipsetErrBusy = unix.Errno(4100)
)

// Destroy destroys one ipset with one nfnetlink request. NLM_F_EXCL makes
// the kernel answer ENOENT for a set that does not exist (without it,
// silence), so the result says which existed. Hand-written, and not
// vishvananda/netlink's IpsetDestroy, for that flag.
func (h Host) Destroy(name string) error {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
	if err != nil {
		return fmt.Errorf("netfilter netlink: %w", err)
	}
	defer c.Close()
	ae := netlink.NewAttributeEncoder()
	ae.Uint8(ipsetAttrProtocol, ipsetProtocol)
	ae.String(ipsetAttrSetName, name)
	attrs, err := ae.Encode()
	if err != nil {
		return err
	}
	// nfgenmsg: family, version NFNETLINK_V0, resource id.
	data := append([]byte{unix.AF_INET, 0, 0, 0}, attrs...)
	_, err = c.Execute(netlink.Message{
		Header: netlink.Header{
			Type:  netlink.HeaderType(nfnlSubsysIPSet<<8 | ipsetCmdDestroy),
			Flags: netlink.Request | netlink.Acknowledge | netlink.Excl,
		},
		Data: data,
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ipsetErrBusy), errors.Is(err, unix.EBUSY):
		return fmt.Errorf("%w: %w", ErrInUse, err)
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	default:
		return err
	}
}

// LegacyTables lists the x_tables (iptables-legacy) tables the kernel
// holds, as "ip nat", from /proc/net/ip_tables_names and
// ip6_tables_names; none when their modules are not loaded.
func (h Host) LegacyTables() []string {
	var out []string
	for _, f := range []struct{ file, fam string }{
		{"/net/ip_tables_names", "ip"}, {"/net/ip6_tables_names", "ip6"},
	} {
		b, err := os.ReadFile(h.Proc + f.file)
		if err != nil {
			continue
		}
		for _, t := range strings.Fields(string(b)) {
			out = append(out, f.fam+" "+t)
		}
	}
	return out
}

// KubeProxyServesOnHost says whether kube-proxy's rules are in the
// running kernel, in any form it writes them: iptables-nft's
// (KubeProxyServes), iptables-legacy's (LegacyNATChains: the same two
// chains filled) or its nftables mode's (KubeProxyNFTablesServes). It
// returns the form found ("iptables-nft", "iptables-legacy",
// "nftables"), "" when none is; an error of one read does not hide a
// form another read finds.
func KubeProxyServesOnHost() (string, error) {
	conn, err := nftables.New()
	if err != nil {
		return "", fmt.Errorf("open nftables: %w", err)
	}
	defer conn.CloseLasting()
	h := Host{Proc: "/proc", Sys: "/sys"}
	var errs []error
	for _, f := range []struct {
		name   string
		serves func() (bool, error)
	}{
		{"iptables-nft", func() (bool, error) { return KubeProxyServes(conn) }},
		{"nftables", func() (bool, error) { return KubeProxyNFTablesServes(conn) }},
		{"iptables-legacy", func() (bool, error) { return legacyServes(h.LegacyNATChains) }},
	} {
		ok, err := f.serves()
		if ok {
			return f.name, nil
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.name, err))
		}
	}
	return "", errors.Join(errs...)
}
