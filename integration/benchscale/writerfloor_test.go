//go:build integration

package benchscale

import (
	"bytes"
	"fmt"
	"net/netip"
	"runtime/pprof"
	"testing"
	"time"

	mobyipvs "github.com/moby/ipvs"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// writerFloor is the floor as issue 11 words it: the proxy's IPVS writer
// alone (this tree's, whatever binary is measured) programming the table
// the cold start programmed, as a plan, into a fresh network namespace
// (see floor): the first Resync of a new Writer. It is the one place
// this package uses the proxy's code, as a reference, not as what is
// measured.
func (b *bench) writerFloor(tb table, cold time.Duration) {
	t := b.t
	plan, err := planOf(tb)
	if err != nil {
		t.Fatalf("writer floor: %v", err)
	}
	var took time.Duration
	var got Expected
	err = inFreshNetns(func() error {
		w, err := ipvs.NewLinux(ipvs.Config{Interface: "kube-ipvs0"})
		if err != nil {
			return fmt.Errorf("writer: %w", err)
		}
		defer w.Close()
		var prof bytes.Buffer
		if b.phases.Profile == 1 { // to set beside the cold start's sync
			if err := pprof.StartCPUProfile(&prof); err != nil {
				return fmt.Errorf("cpu profile: %w", err)
			}
		}
		t0 := time.Now()
		err = w.Resync(plan)
		took = time.Since(t0)
		if b.phases.Profile == 1 {
			pprof.StopCPUProfile()
			b.report(Profile{Proxy: b.bin.label, Round: b.run.Round, When: "writer-floor", Kind: "cpu", Pprof: prof.Bytes()})
		}
		if err != nil {
			return fmt.Errorf("resync: %w", err)
		}
		got, err = countHere()
		return err
	})
	b.floorHolds(t, "writer floor", got, err)
	t.Logf("writer floor: the proxy's IPVS writer programmed the same table in %v; the cold start took %.2f× that",
		took.Round(time.Millisecond), cold.Seconds()/took.Seconds())
	b.run.Add("floor: the same table by the proxy's IPVS writer alone", took.Seconds(), "s")
	b.run.Add("cold start / writer floor", cold.Seconds()/took.Seconds(), "")
}

// planOf is the table as a plan: a virtual server per IPVS service, a
// ClusterIP where its address was bound on kube-ipvs0, else a NodePort.
func planOf(tb table) (policy.Plan, error) {
	bound := map[netip.Addr]bool{}
	for _, a := range tb.addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			bound[ip.Unmap()] = true
		}
	}
	plan := policy.Plan{Node: NodeName}
	for i, s := range tb.services {
		addr, ok := netip.AddrFromSlice(s.Address)
		if !ok {
			return plan, fmt.Errorf("virtual server %v: bad address", s.Address)
		}
		addr = addr.Unmap()
		proto := policy.ProtocolTCP
		if s.Protocol == unix.IPPROTO_UDP {
			proto = policy.ProtocolUDP
		}
		kind := policy.KindNodePort
		if bound[addr] {
			kind = policy.KindClusterIP
		}
		vs := policy.VirtualServer{
			Service: policy.ServiceKey{Namespace: "floor", Name: fmt.Sprint("svc-", i)}, PortName: "p", Kind: kind,
			Address: addr, Port: s.Port, Protocol: proto, Scheduler: s.SchedName,
			TrafficPolicy: policy.PolicyCluster, Masquerade: policy.MasqueradeOffCluster,
		}
		for _, d := range tb.dests[i] {
			da, ok := netip.AddrFromSlice(d.Address)
			if !ok {
				return plan, fmt.Errorf("destination %v: bad address", d.Address)
			}
			vs.Destinations = append(vs.Destinations, policy.Destination{Address: da.Unmap(), Port: d.Port, Weight: int32(d.Weight)})
		}
		plan.VirtualServers = append(plan.VirtualServers, vs)
	}
	policy.SortVirtualServers(plan.VirtualServers)
	return plan, nil
}

// countHere counts what IPVS holds in this thread's network namespace.
func countHere() (Expected, error) {
	h, err := mobyipvs.New("")
	if err != nil {
		return Expected{}, fmt.Errorf("ipvs handle: %w", err)
	}
	defer h.Close()
	return (&kernel{h: h}).count()
}

// floorHolds fails the test unless the floor named what programmed the
// whole table: err is its error, got what the kernel held after it.
func (b *bench) floorHolds(t *testing.T, what string, got Expected, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got != b.want {
		t.Fatalf("%s: the kernel holds %+v, want %+v", what, got, b.want)
	}
}
