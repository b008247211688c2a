package app

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/kubeclient"
)

// nodePortAddressesPrimary is nodePortAddresses' special value: the node's
// primary IP of each family.
const nodePortAddressesPrimary = "primary"

// serviceHealthAddrs are the addresses the healthCheckNodePort servers
// listen on, as kube-proxy's: with no nodePortAddresses, every address
// (nil). Otherwise kube-proxy runs one server per family, and so each
// family (those of the cluster CIDRs and of the CIDRs given) gets the
// host's addresses in its CIDRs, or its unspecified address when no CIDR
// of the family is given or one of them is 0.0.0.0/0 or ::/0. "primary"
// means the node's primary IPs (primary); without one, every address.
func serviceHealthAddrs(nodePortAddresses []string, clusterFamilies []corev1.IPFamily, primary, host []netip.Addr) []netip.Addr {
	if len(nodePortAddresses) == 0 {
		return nil
	}
	var cidrs []netip.Prefix
	if len(nodePortAddresses) == 1 && nodePortAddresses[0] == nodePortAddressesPrimary {
		for _, a := range primary {
			if !a.IsLoopback() {
				cidrs = append(cidrs, netip.PrefixFrom(a, a.BitLen()))
			}
		}
		if len(cidrs) == 0 {
			return nil
		}
	} else {
		cidrs = prefixes(nodePortAddresses)
	}
	v4, v6 := false, false
	for _, f := range clusterFamilies {
		v4, v6 = v4 || f == corev1.IPv4Protocol, v6 || f == corev1.IPv6Protocol
	}
	for _, p := range cidrs {
		v4, v6 = v4 || p.Addr().Is4(), v6 || p.Addr().Is6()
	}
	var out []netip.Addr
	for _, fam := range []struct {
		on  bool
		is4 bool
		any netip.Addr
	}{{v4, true, netip.IPv4Unspecified()}, {v6, false, netip.IPv6Unspecified()}} {
		if !fam.on {
			continue
		}
		mine := slices.DeleteFunc(slices.Clone(cidrs), func(p netip.Prefix) bool { return p.Addr().Is4() != fam.is4 })
		if len(mine) == 0 || slices.ContainsFunc(mine, func(p netip.Prefix) bool { return p.Bits() == 0 }) {
			out = append(out, fam.any)
			continue
		}
		for _, a := range host {
			a = a.Unmap()
			if a.Is4() == fam.is4 && slices.ContainsFunc(mine, func(p netip.Prefix) bool { return p.Contains(a) }) {
				out = append(out, a)
			}
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// interfaceAddrs are the host's interface addresses, those of the service
// interface (exclude) left out, as kube-proxy reads them once at startup
// for the health check servers.
func interfaceAddrs(exclude string) ([]netip.Addr, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	var out []netip.Addr
	for _, ifc := range ifaces {
		if ifc.Name == exclude {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", ifc.Name, err)
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok {
					out = append(out, ip.Unmap())
				}
			}
		}
	}
	return out, nil
}

// primaryIPs are the node's primary IPs, as kube-proxy picks them: per
// family, the Node's first InternalIP, else its first ExternalIP; a
// specified bindAddress replaces its family's.
func primaryIPs(node *corev1.Node, bind netip.Addr) []netip.Addr {
	var v4, v6 netip.Addr
	if node != nil {
		for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
			for _, na := range node.Status.Addresses {
				a, err := netip.ParseAddr(strings.TrimSpace(na.Address))
				if na.Type != t || err != nil {
					continue
				}
				a = a.Unmap()
				if a.Is4() && !v4.IsValid() {
					v4 = a
				} else if a.Is6() && !v6.IsValid() {
					v6 = a
				}
			}
		}
	}
	if bind.IsValid() && !bind.IsUnspecified() {
		if bind = bind.Unmap(); bind.Is4() {
			v4 = bind
		} else {
			v6 = bind
		}
	}
	var out []netip.Addr
	for _, a := range []netip.Addr{v4, v6} {
		if a.IsValid() {
			out = append(out, a)
		}
	}
	return out
}

// getNode reads this node's Node object; nil if it cannot be read.
func getNode(ctx context.Context, cs kubeclient.Interface, name string) (*corev1.Node, error) {
	n, err := cs.Node(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", name, err)
	}
	return n, nil
}

// healthCheckAddrs are serviceHealthAddrs for this host and node. What
// cannot be read (the Node, the interfaces) leaves every address, as in
// kube-proxy, with an error logged.
func healthCheckAddrs(ctx context.Context, cs kubeclient.Interface, rc RunConfig, families []corev1.IPFamily) []netip.Addr {
	logger := klog.FromContext(ctx)
	npa := rc.Policy.NodePortAddresses
	if len(npa) == 0 {
		return nil
	}
	var primary []netip.Addr
	if len(npa) == 1 && npa[0] == nodePortAddressesPrimary {
		node, err := getNode(ctx, cs, rc.NodeName)
		if err != nil {
			logger.Error(err, "Failed to read the node's primary IPs for the health check node ports")
		}
		primary = primaryIPs(node, rc.BindAddress)
	}
	host, err := interfaceAddrs(rc.DataPlane.Interface)
	if err != nil {
		logger.Error(err, "Failed to read the host's addresses; health check node ports listen on every address")
		return nil
	}
	addrs := serviceHealthAddrs(npa, families, primary, host)
	logger.Info("Health check node ports listen on the node port addresses", "nodePortAddresses", npa, "addresses", addrs)
	return addrs
}
