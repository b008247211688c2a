//go:build integration

package nftwriter

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/nftables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"golang.org/x/sys/unix"
)

// manyServices returns n IPv4 and n IPv6 ClusterIP services with two
// destinations each: 5 elements per virtual server.
func manyServices(n int) policy.Plan {
	var vss []policy.VirtualServer
	for i := range n {
		hi, lo := byte(i>>8), byte(i)
		v4 := policy.VirtualServer{Service: policy.ServiceKey{Namespace: "ns", Name: fmt.Sprintf("svc-%d", i)}, Kind: policy.KindClusterIP,
			Address: netip.AddrFrom4([4]byte{10, 96, hi, lo}), Port: 80, Protocol: policy.ProtocolTCP, Masquerade: policy.MasqueradeOffCluster}
		v6 := v4
		v6.Address = netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x96, 14: hi, 15: lo})
		for j := range 2 {
			// All local, to fill the hairpin set too.
			v4.Destinations = append(v4.Destinations, localDest(netip.AddrFrom4([4]byte{10, 244, hi, lo}).String(), uint16(8000+j)))
			v6.Destinations = append(v6.Destinations, localDest(netip.AddrFrom16([16]byte{0xfd, 0, 2, 0x44, 14: hi, 15: lo}).String(), uint16(8000+j)))
		}
		vss = append(vss, v4, v6)
	}
	policy.SortVirtualServers(vss)
	return policy.Plan{Node: "node-a", VirtualServers: vss}
}

// TestResyncLarge programs 8000 virtual servers (40000 elements) in one
// batch: the elements are split into messages that fit a netlink
// attribute, the batch fits the socket buffers, and the rule count is the
// same as for one service.
func TestResyncLarge(t *testing.T) {
	const n = 4000
	w := newWriter(t)
	plan := manyServices(n)
	start := time.Now()
	if err := w.Resync(plan); err != nil {
		t.Fatalf("Resync of %d virtual servers: %v", 2*n, err)
	}
	t.Logf("Resync of %d virtual servers: %v", 2*n, time.Since(start).Round(time.Millisecond))
	c := newConn(t)
	if got := ruleCounts(t, c, ourTable); !cmp.Equal(got, wantRules) {
		t.Errorf("rules per chain with %d services (-want +got):\n%s", 2*n, cmp.Diff(wantRules, got))
	}
	want := map[string]int{"service-ips-v4": n, "service-ports-v4": n, "masquerade-off-cluster-v4": n, "hairpin-v4": 2 * n,
		"service-ips-v6": n, "service-ports-v6": n, "masquerade-off-cluster-v6": n, "hairpin-v6": 2 * n}
	for name, count := range want {
		s, err := c.GetSetByName(ourTable, name)
		if err != nil {
			t.Fatalf("GetSetByName %s: %v", name, err)
		}
		elems, err := c.GetSetElements(s)
		if err != nil {
			t.Fatalf("GetSetElements %s: %v", name, err)
		}
		if len(elems) != count {
			t.Errorf("set %s: %d elements, want %d", name, len(elems), count)
		}
	}
	sp := policy.ServicePlan{Service: policy.ServiceKey{Namespace: "ns", Name: "svc-1234"}}
	start = time.Now()
	if err := w.Apply([]policy.ServicePlan{sp}); err != nil {
		t.Fatalf("Apply (delete one service): %v", err)
	}
	t.Logf("Apply deleting one service among %d: %v", n, time.Since(start).Round(time.Microsecond))
	s, _ := c.GetSetByName(ourTable, "service-ips-v4")
	if elems, err := c.GetSetElements(s); err != nil || len(elems) != n-1 {
		t.Errorf("service-ips-v4 after deleting one service: %d elements (err %v), want %d", len(elems), err, n-1)
	}
}

// TestApplySequenceMatchesFake runs Apply steps that change map values,
// reshape source ranges, and delete services sharing an address, and
// compares the kernel with the fake after every step.
func TestApplySequenceMatchesFake(t *testing.T) {
	plan := fullPlan()
	w := newWriter(t)
	f := nft.NewFake()
	fw := nft.New(testConfig, f)
	for _, x := range []*nft.Writer{w, fw} {
		if err := x.Resync(plan); err != nil {
			t.Fatalf("Resync: %v", err)
		}
	}
	empty := servicePlan(plan, "default/empty")
	empty.VirtualServers[0].WhenEmpty = policy.EmptyDrop
	filled := servicePlan(plan, "default/empty")
	for i := range filled.VirtualServers {
		filled.VirtualServers[i].WhenEmpty = ""
		filled.VirtualServers[i].Destinations = []policy.Destination{dest("10.244.5.5", 80)}
	}
	filled.VirtualServers[1].Destinations = []policy.Destination{dest("fd00:244:5::5", 80)}
	lb := servicePlan(plan, "default/lb")
	lb.VirtualServers[0].SourceRanges = append(lb.VirtualServers[0].SourceRanges, p("198.51.101.0/24"))
	lbNarrow := servicePlan(plan, "default/lb")
	lbNarrow.VirtualServers[0].SourceRanges = []netip.Prefix{p("198.51.100.64/26")}
	c := newConn(t)
	for _, step := range []struct {
		name    string
		changes []policy.ServicePlan
	}{
		{"Reject becomes Drop", []policy.ServicePlan{empty}},
		{"empty service gets destinations", []policy.ServicePlan{filled}},
		{"source range grows (merged interval replaced)", []policy.ServicePlan{lb}},
		{"source range shrinks inside the old one", []policy.ServicePlan{lbNarrow}},
		{"one of two services sharing 192.0.2.2 deleted", []policy.ServicePlan{{Service: policy.ServiceKey{Namespace: "shop", Name: "a"}}}},
		{"the other one too", []policy.ServicePlan{{Service: policy.ServiceKey{Namespace: "shop", Name: "b"}}}},
		{"two services in one batch", []policy.ServicePlan{servicePlan(plan, "shop/a"), {Service: policy.ServiceKey{Namespace: "default", Name: "web"}}}},
	} {
		for _, x := range []*nft.Writer{w, fw} {
			if err := x.Apply(step.changes); err != nil {
				t.Fatalf("%s: Apply: %v", step.name, err)
			}
		}
		if got, want := kernelDump(t, c), f.Dump(); got != want {
			t.Errorf("%s: kernel differs from the fake (-fake +kernel):\n%s", step.name, cmp.Diff(want, got))
		} else {
			t.Logf("%s: kernel equals the fake (%d element changes in the batch)", step.name, strings.Count(strings.Join(f.LastBatch(), "\n"), " element "))
		}
	}
}

// TestKernelRefusalNeedsResync deletes an element behind the writer's
// back: the kernel refuses the next Apply that deletes it (ENOENT), the
// writer asks for a Resync, and the Resync repairs the table.
func TestKernelRefusalNeedsResync(t *testing.T) {
	w := newWriter(t)
	plan := fullPlan()
	if err := w.Resync(plan); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	c := newConn(t)
	want := kernelDump(t, c)
	s, err := c.GetSetByName(ourTable, "service-ports-v4")
	if err != nil {
		t.Fatalf("GetSetByName: %v", err)
	}
	key := []byte{192, 0, 2, 2, unix.IPPROTO_TCP, 0, 0, 0, 0, 80, 0, 0}
	if err := c.SetDeleteElements(s, []nftables.SetElement{{Key: key}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatalf("delete 192.0.2.2 . tcp . 80 behind the writer's back: %v", err)
	}
	err = w.Apply([]policy.ServicePlan{{Service: policy.ServiceKey{Namespace: "shop", Name: "a"}}})
	if !errors.Is(err, unix.ENOENT) || !w.NeedsResync() {
		t.Fatalf("Apply: %v, NeedsResync %t; want ENOENT and true", err, w.NeedsResync())
	}
	t.Logf("kernel refused the batch: %v", err)
	if err := w.Apply(nil); !errors.Is(err, nft.ErrNeedsResync) {
		t.Errorf("Apply after the failure: %v, want ErrNeedsResync", err)
	}
	// The refused batch changed nothing: shop/a's other elements are there.
	sets := parseDump(kernelDump(t, c))
	if !slices.Contains(sets["masquerade-always-v4"], "192.0.2.2 . tcp . 80") || !slices.Contains(sets["service-ips-v4"], "192.0.2.2") {
		t.Errorf("the refused batch changed the table: masquerade-always-v4 %q, service-ips-v4 %q", sets["masquerade-always-v4"], sets["service-ips-v4"])
	}
	if err := w.Resync(plan); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	if got := kernelDump(t, c); got != want {
		t.Errorf("Resync did not repair the table (-want +got):\n%s", cmp.Diff(want, got))
	}
}
