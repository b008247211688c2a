package proxier

import (
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// slowCounts is a fake IPVS whose count of every virtual server's
// destinations (/proc/net/ip_vs) says on began that it started and
// returns once release is closed: a large table's read.
type slowCounts struct {
	*ipvs.FakeKernel
	began   chan struct{}
	release chan struct{}
}

func (s *slowCounts) DestinationCounts() (map[ipvs.Key]int, error) {
	select {
	case s.began <- struct{}{}:
	default:
	}
	<-s.release
	return s.FakeKernel.DestinationCounts()
}

// TestChangeNotHeldUpByTheDriftCount: the loop's idle probe starts the
// IPVS writer's count of destinations, and an endpoint change queued
// while that count runs is applied without waiting for it.
func TestChangeNotHeldUpByTheDriftCount(t *testing.T) {
	k := &slowCounts{FakeKernel: ipvs.NewFakeKernel(), began: make(chan struct{}, 1), release: make(chan struct{})}
	dp := newDataPlane(nft.New(nft.Config{}, nft.NewFake()),
		ipvs.New(ipvs.Config{RepairReader: k}, k, ipvs.NewFakeLinks(), ipvs.NewFakeSysctls()))
	tp := newTestProxier(t, func(c *Config) { c.DataPlane, c.ProbeInterval = dp, 20*time.Millisecond },
		node(testNode, "192.168.0.10", nil), service("web", "10.96.0.10"), slice("web-1", "web", ep{"10.244.1.5", testNode}))
	tp.start(t)
	t.Cleanup(func() { close(k.release) }) // before the loop is stopped
	select {
	case <-k.began:
	case <-time.After(10 * time.Second):
		t.Fatal("no count of destinations began")
	}
	before := tp.Stats().Applies
	tp.slice(slice("web-1", "web", ep{"10.244.1.6", testNode}))
	waitFor(t, "the change applied while the count runs", func() bool { return tp.Stats().Applies > before })
}
