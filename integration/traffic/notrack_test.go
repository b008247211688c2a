//go:build integration

package traffic

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TestNoTrackServiceLeavesNoConntrackEntries: a DNS-like UDP service
// annotated kube-ipvs-proxy.io/notrack answers, and node-a's conntrack
// table holds no entry for its flows (neither direction), while the same
// traffic to an identical service without the annotation, in the same
// run, is tracked.
func TestNoTrackServiceLeavesNoConntrackEntries(t *testing.T) {
	l := newLab(t)
	untracked, tracked := netip.MustParseAddr("10.96.12.1"), netip.MustParseAddr("10.96.12.2")
	l.setService(service("dns-notrack", []string{untracked.String()}, annotate(policy.AnnotationNoTrack, "true")),
		l.ep("pod-a1"), l.ep("pod-b1"))
	// Other pods: a destination shared with a NOTRACK service is tracked
	// one way only (the plan warns).
	l.setService(service("dns-tracked", []string{tracked.String()}), l.ep("pod-a2"), l.ep("pod-b2"))
	l.resync()
	client := l.pod("pod-a3")
	backends := []netip.Addr{l.pod("pod-a1").v4, l.pod("pod-b1").v4}
	l.expectOnly(t, client, hostPort(untracked, 53), UDP, 6, "pod-a1", "pod-b1")
	l.expectOnly(t, client, hostPort(tracked, 53), UDP, 6, "pod-a2", "pod-b2")
	flows, err := netlink.ConntrackTableList(netlink.ConntrackTable, unix.AF_INET)
	if err != nil {
		t.Fatalf("list conntrack: %v", err)
	}
	var forUntracked, forTracked []*netlink.ConntrackFlow
	for _, f := range flows {
		switch {
		case f.Forward.Protocol != unix.IPPROTO_UDP:
		case namesVIP(f, untracked) || strayReply(f, client.v4, backends):
			forUntracked = append(forUntracked, f)
		case namesVIP(f, tracked):
			forTracked = append(forTracked, f)
		}
	}
	t.Logf("conntrack: %d flows in all; %d for the NOTRACK service, %d for the tracked one", len(flows), len(forUntracked), len(forTracked))
	if len(forUntracked) != 0 {
		t.Errorf("%d conntrack entries for the NOTRACK service %s:53, want 0:", len(forUntracked), untracked)
		for _, f := range forUntracked {
			t.Logf("  %s", f)
		}
	}
	if len(forTracked) == 0 {
		t.Errorf("no conntrack entry for the tracked service %s:53: the comparison proves nothing", tracked)
	}
}

// namesVIP reports whether either tuple of a flow is to or from vip:53.
func namesVIP(f *netlink.ConntrackFlow, vip netip.Addr) bool {
	for _, tu := range []netlink.IPTuple{f.Forward, f.Reverse} {
		if addrOf(tu.DstIP) == vip && tu.DstPort == 53 || addrOf(tu.SrcIP) == vip && tu.SrcPort == 53 {
			return true
		}
	}
	return false
}

// strayReply reports whether a flow was started by a backend's answer
// (backend:5353 → client): what an untracked request's tracked reply
// would create. A tracked service's replies match its own entry instead.
func strayReply(f *netlink.ConntrackFlow, client netip.Addr, backends []netip.Addr) bool {
	src := addrOf(f.Forward.SrcIP)
	return f.Forward.SrcPort == podUDPPort && addrOf(f.Forward.DstIP) == client && slices.Contains(backends, src)
}

func addrOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}
