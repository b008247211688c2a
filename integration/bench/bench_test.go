//go:build integration

package bench

import (
	"bytes"
	"fmt"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/plantest"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// destsPerService is the "× 10 destinations".
const destsPerService = 10

// benchPlan is n ClusterIP services 10.96.x.y:80/TCP, rr, each with 10
// destinations on port 8080.
func benchPlan(n int) policy.Plan {
	plan := policy.Plan{Node: "node-a"}
	for i := 0; i < n; i++ {
		vs := policy.VirtualServer{
			Service: policy.ServiceKey{Namespace: "bench", Name: fmt.Sprintf("svc-%d", i)}, PortName: "http", Kind: policy.KindClusterIP,
			Address: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), Port: 80, Protocol: policy.ProtocolTCP,
			Scheduler: "rr", TrafficPolicy: policy.PolicyCluster, Masquerade: policy.MasqueradeOffCluster,
		}
		for j := 0; j < destsPerService; j++ {
			vs.Destinations = append(vs.Destinations, policy.Destination{
				Address: netip.AddrFrom4([4]byte{10, byte(64 + j), byte(i >> 8), byte(i)}), Port: 8080, Weight: 1})
		}
		plan.VirtualServers = append(plan.VirtualServers, vs)
	}
	policy.SortVirtualServers(plan.VirtualServers)
	return plan
}

// ipvsadmRestore is the same table as ipvsadm -R input.
func ipvsadmRestore(plan policy.Plan) []byte {
	var b bytes.Buffer
	for _, vs := range plan.VirtualServers {
		fmt.Fprintf(&b, "-A -t %s:%d -s %s\n", vs.Address, vs.Port, vs.Scheduler)
		for _, d := range vs.Destinations {
			fmt.Fprintf(&b, "-a -t %s:%d -r %s:%d -m -w %d\n", vs.Address, vs.Port, d.Address, d.Port, d.Weight)
		}
	}
	return b.Bytes()
}

func run(b *testing.B, stdin []byte, name string, args ...string) {
	b.Helper()
	cmd := exec.Command(name, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

func newIPVSWriter(b *testing.B) *ipvs.Writer {
	b.Helper()
	w, err := ipvs.NewLinux(ipvs.Config{Interface: "kube-ipvs0"})
	if err != nil {
		b.Fatal(err)
	}
	return w
}

func cleanIPVS(b *testing.B) {
	b.Helper()
	if err := newIPVSWriter(b).Cleanup(); err != nil {
		b.Fatal(err)
	}
	run(b, nil, "ipvsadm", "-C")
}

// BenchmarkIPVSInitial programs n VSs × 10 destinations from empty: our
// writer (a fresh process's first Resync) against ipvsadm -R of the same
// table.
func BenchmarkIPVSInitial(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		plan := benchPlan(n)
		restore := ipvsadmRestore(plan)
		b.Run(fmt.Sprintf("writer/%d", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				cleanIPVS(b)
				w := newIPVSWriter(b)
				b.StartTimer()
				if err := w.Resync(plan); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("ipvsadm-restore/%d", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				cleanIPVS(b)
				b.StartTimer()
				run(b, restore, "ipvsadm", "-R")
			}
		})
	}
	cleanIPVS(b)
}

// changesPerOp is how many endpoint changes one benchmark iteration makes,
// so that one iteration (the VM affords few) still averages many.
const changesPerOp = 200

// BenchmarkIPVSEndpointChange replaces one destination of one service
// with n services programmed: the per-change cost must not grow with n.
// It reports ns/change and ops/change (IPVS netlink operations).
func BenchmarkIPVSEndpointChange(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			cleanIPVS(b)
			plan := benchPlan(n)
			w := newIPVSWriter(b)
			if err := w.Resync(plan); err != nil {
				b.Fatal(err)
			}
			changes := plantest.Groups(plan)
			before := totalOps(w.Ops())
			i := 0
			var elapsed time.Duration
			for b.Loop() {
				for range changesPerOp {
					c := changes[(i*7919)%len(changes)]
					vs := c.VirtualServers[0]
					dests := append([]policy.Destination(nil), vs.Destinations...)
					// Alternate the last destination between two addresses.
					dests[len(dests)-1].Address = netip.AddrFrom4([4]byte{10, 200 + byte(i%2), byte(i >> 8), byte(i)})
					vs.Destinations = dests
					change := []policy.ServicePlan{{Service: c.Service, VirtualServers: []policy.VirtualServer{vs}}}
					start := time.Now()
					if err := w.Apply(change); err != nil {
						b.Fatal(err)
					}
					elapsed += time.Since(start)
					i++
				}
			}
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(i), "ns/change")
			b.ReportMetric(float64(totalOps(w.Ops())-before)/float64(i), "ops/change")
			cleanIPVS(b)
		})
	}
}

func totalOps(ops map[string]int) int {
	n := 0
	for k, v := range ops {
		if k != "error" {
			n += v
		}
	}
	return n
}

// BenchmarkNftables programs the table with 10k services' elements: our
// writer's one-batch Resync against nft -f of the same ruleset (the
// writer's own rendering, which is what --dry-run prints).
func BenchmarkNftables(b *testing.B) {
	const n = 10000
	plan := benchPlan(n)
	cfg := nft.Config{ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}
	ruleset := []byte(nft.Render(cfg, plan))
	w, err := nft.NewLinux(cfg)
	if err != nil {
		b.Fatal(err)
	}
	clean := func() {
		if err := w.Cleanup(); err != nil {
			b.Fatal(err)
		}
	}
	b.Run(fmt.Sprintf("writer/%d", n), func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			clean()
			b.StartTimer()
			if err := w.Resync(plan); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run(fmt.Sprintf("nft-f/%d", n), func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			clean()
			b.StartTimer()
			run(b, ruleset, "nft", "-f", "-")
		}
	})
	clean()
}
