//go:build integration

package traffic

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/moby/ipvs"
	"github.com/vishvananda/netlink"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
)

// TestHeadStartFiltersThenServes: on a cold node, the head start writes
// the table, then binds the service's VIP and creates its virtual servers
// without destinations. While it stands, the host's own port on the VIP
// is refused (the table filtered it before the address was bound) and the
// service port is not served; the first Resync then serves it. A new data
// plane on the node now programmed gives no head start.
func TestHeadStartFiltersThenServes(t *testing.T) {
	l := newLab(t)
	vip := netip.MustParseAddr("10.96.11.1")
	s := service("web", []string{vip.String()})
	l.setService(s, l.ep("pod-a1"))
	l.serve(l.root, "node-a-host", 8181, 8181)
	plan, ws := l.engine.Compute()
	if len(ws) > 0 {
		t.Fatalf("plan warnings: %v", ws)
	}
	rest, err := l.dp.HeadStart(plan.WithoutEndpoints())
	if err != nil || rest == nil {
		t.Fatalf("HeadStart on a cold node = %v, %v; want its IPVS part", rest != nil, err)
	}
	start := time.Now()
	if err := rest(); err != nil {
		t.Fatalf("head start, IPVS part: %v", err)
	}
	t.Logf("head start, IPVS part: %v", time.Since(start))

	ipv, err := ipvs.New("")
	if err != nil {
		t.Fatal(err)
	}
	defer ipv.Close()
	svcs, err := ipv.GetServices()
	if err != nil {
		t.Fatal(err)
	}
	var found int
	for _, svc := range svcs {
		if !svc.Address.Equal(vip.AsSlice()) {
			continue
		}
		found++
		dests, err := ipv.GetDestinations(svc)
		if err != nil || len(dests) != 0 {
			t.Errorf("virtual server %s:%d after the head start: %d destinations (%v), want none", svc.Address, svc.Port, len(dests), err)
		}
	}
	if found != 2 {
		t.Errorf("%d virtual servers on %s after the head start, want 2 (80/TCP, 53/UDP)", found, vip)
	}
	link, err := netlink.LinkByName("kube-ipvs0")
	if err != nil {
		t.Fatalf("kube-ipvs0 after the head start: %v", err)
	}
	addrs, err := netlink.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(addrs, func(a netlink.Addr) bool { return a.IP.Equal(vip.AsSlice()) }) {
		t.Errorf("%s not bound to kube-ipvs0 after the head start: %v", vip, addrs)
	}

	from := l.pod("pod-a3")
	l.expectFastFailure(t, from, TCP, hostPort(vip, 8181))
	l.expectFastFailure(t, from, UDP, hostPort(vip, 8181))
	if name, _, err := l.Exchange(from, TCP, hostPort(vip, 80), l.timeout); err == nil {
		t.Errorf("TCP %s:80 answered by %s before the first Resync", vip, name)
	} else {
		t.Logf("TCP %s:80 before the first Resync: %v", vip, err)
	}

	if err := l.dp.Resync(plan); err != nil {
		t.Fatalf("Resync after the head start: %v", err)
	}
	l.expectOnly(t, from, hostPort(vip, 80), TCP, 4, "pod-a1")
	l.expectOnly(t, from, hostPort(vip, 53), UDP, 4, "pod-a1")
	l.expectFastFailure(t, from, TCP, hostPort(vip, 8181))

	dp2, err := proxier.NewDataPlane(proxier.DataPlaneConfig{Interface: "kube-ipvs0", ClusterCIDRs: clusterCIDRs, GracefulPeriod: time.Second})
	if err != nil {
		t.Fatalf("NewDataPlane (restart): %v", err)
	}
	defer dp2.Close()
	if rest, err := dp2.HeadStart(plan.WithoutEndpoints()); rest != nil || err != nil {
		t.Errorf("HeadStart on the programmed node = %v, %v; want none", rest != nil, err)
	}
	l.expectOnly(t, from, hostPort(vip, 80), TCP, 4, "pod-a1")
}
