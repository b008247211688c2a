package apiconv

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	netutils "k8s.io/utils/net"
)

// HeldClusterIPs returns the ClusterIPs svc holds whatever this proxy
// makes of it: served, another proxy's, or invalid. The apiserver gave
// them to the Service, so the engine keeps them from other Services'
// external and load-balancer IPs even when it does not serve the Service
// (policy.Engine.SetUnmanagedService). Every entry of spec.clusterIPs
// (else spec.clusterIP) that reads as an address counts, read as
// leniently as kube-proxy reads them (leading zeros, IPv4-mapped IPv6);
// "None" and an empty one hold nothing, and an unreadable one is
// skipped: an invalid Service still holds its readable addresses.
func HeldClusterIPs(svc *corev1.Service) []netip.Addr {
	raw := svc.Spec.ClusterIPs
	if len(raw) == 0 && svc.Spec.ClusterIP != "" {
		raw = []string{svc.Spec.ClusterIP}
	}
	var out []netip.Addr
	for _, r := range raw {
		ip := netutils.ParseIPSloppy(r)
		if ip == nil {
			continue
		}
		a, ok := netip.AddrFromSlice(ip)
		if !ok {
			continue
		}
		out = append(out, a.Unmap())
	}
	return out
}
