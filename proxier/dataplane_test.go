package proxier

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

type fakes struct {
	nft    *nft.Fake
	kernel *ipvs.FakeKernel
	dp     *DataPlane
}

func newFakes(t *testing.T) fakes {
	t.Helper()
	f := fakes{nft: nft.NewFake(), kernel: ipvs.NewFakeKernel()}
	f.dp = newDataPlane(nft.New(nft.Config{}, f.nft),
		ipvs.New(ipvs.Config{}, f.kernel, ipvs.NewFakeLinks(), ipvs.NewFakeConntrack(), ipvs.NewFakeSysctls()))
	return f
}

func webPlan(dests ...string) policy.ServicePlan {
	vs := policy.VirtualServer{Service: "default/web", PortName: "http", Kind: policy.KindClusterIP,
		Address: netip.MustParseAddr("10.96.0.1"), Port: 80, Protocol: policy.ProtocolTCP, Scheduler: "rr",
		TrafficPolicy: policy.PolicyCluster, Masquerade: policy.MasqueradeNever, Destinations: []policy.Destination{}}
	for _, d := range dests {
		vs.Destinations = append(vs.Destinations, policy.Destination{Address: netip.MustParseAddr(d), Port: 8080, Weight: 1})
	}
	if len(dests) == 0 {
		vs.WhenEmpty = policy.EmptyReject
	}
	return policy.ServicePlan{Service: policy.ServiceKey{Namespace: "default", Name: "web"}, VirtualServers: []policy.VirtualServer{vs}}
}

func TestDataPlaneProgramsBothWriters(t *testing.T) {
	f := newFakes(t)
	sp := webPlan("10.244.1.5")
	if err := f.dp.Resync(policy.Plan{Node: "node-a", VirtualServers: sp.VirtualServers}); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	if err := f.dp.Apply([]policy.ServicePlan{webPlan("10.244.1.5", "10.244.1.6")}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if d := f.kernel.Dump(); !strings.Contains(d, "10.244.1.6") {
		t.Errorf("IPVS lacks the new destination:\n%s", d)
	}
	if d := f.nft.Dump(); !strings.Contains(d, "10.244.1.6") {
		t.Errorf("nftables lacks the new destination's hairpin element:\n%s", d)
	}
	if f.dp.NeedsResync() {
		t.Error("NeedsResync after successful syncs")
	}
}

func TestDataPlaneFailureInOneWriterDoesNotStopTheOther(t *testing.T) {
	f := newFakes(t)
	if err := f.dp.Resync(policy.Plan{Node: "node-a"}); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	boom := errors.New("netlink: no buffer space")
	f.nft.FailNextFlush(boom)
	err := f.dp.Apply([]policy.ServicePlan{webPlan("10.244.1.5")})
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "nftables: ") {
		t.Fatalf("Apply error %v, want the nftables failure named", err)
	}
	if d := f.kernel.Dump(); !strings.Contains(d, "10.244.1.5") {
		t.Errorf("IPVS was not programmed despite the nftables failure:\n%s", d)
	}
	if !f.dp.NeedsResync() {
		t.Error("a failed Apply must mark the next sync full")
	}
}
