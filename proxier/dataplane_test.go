package proxier

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

type fakes struct {
	nft    *nft.Fake
	kernel *ipvs.FakeKernel
	links  *ipvs.FakeLinks
	sys    *ipvs.FakeSysctls
	dp     *DataPlane
}

func newFakes(t *testing.T) fakes {
	t.Helper()
	f := fakes{nft: nft.NewFake(), kernel: ipvs.NewFakeKernel(), links: ipvs.NewFakeLinks(),
		sys: ipvs.NewFakeSysctls()}
	f.restart()
	return f
}

// restart replaces the data plane with a new one over the same fake
// kernel, as a new process (a restarted proxy, --cleanup) gets.
func (f *fakes) restart() {
	f.dp = newDataPlane(nft.New(nft.Config{}, f.nft), ipvs.New(ipvs.Config{}, f.kernel, f.links, f.sys))
}

func webPlan(dests ...string) policy.ServicePlan {
	vs := policy.VirtualServer{Service: policy.ServiceKey{Namespace: "default", Name: "web"}, PortName: "http", Kind: policy.KindClusterIP,
		Address: netip.MustParseAddr("10.96.0.1"), Port: 80, Protocol: policy.ProtocolTCP, Scheduler: "rr",
		TrafficPolicy: policy.PolicyCluster, Masquerade: policy.MasqueradeNever, Destinations: []policy.Destination{}}
	for _, d := range dests {
		vs.Destinations = append(vs.Destinations, policy.Destination{Address: netip.MustParseAddr(d), Port: 8080, Weight: 1, Local: true})
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

// TestDataPlaneResyncTimesEachWriter: LastResync is nftables' Resync
// from its start and IPVS's from nftables' end, each on the data plane's
// clock.
func TestDataPlaneResyncTimesEachWriter(t *testing.T) {
	f := newFakes(t)
	base := time.Unix(1_000_000, 0)
	reads := []time.Duration{0, 3 * time.Millisecond, 10 * time.Millisecond}
	f.dp.now = func() time.Time {
		if len(reads) == 0 {
			t.Fatal("the clock was read more than three times")
		}
		at := base.Add(reads[0])
		reads = reads[1:]
		return at
	}
	if err := f.dp.Resync(policy.Plan{Node: "node-a", VirtualServers: webPlan("10.244.1.5").VirtualServers}); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	want := ResyncTimes{NFTables: 3 * time.Millisecond, IPVS: 7 * time.Millisecond}
	if got := f.dp.LastResync(); got != want {
		t.Errorf("LastResync() = %+v, want %+v", got, want)
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

// webWithNodePort is default/web with a NodePort virtual server on the
// node address 192.168.100.1 besides its ClusterIP.
func webWithNodePort(dests ...string) policy.Plan {
	sp := webPlan(dests...)
	np := sp.VirtualServers[0]
	np.Kind, np.Address, np.Port, np.Masquerade = policy.KindNodePort, netip.MustParseAddr("192.168.100.1"), 30080, policy.MasqueradeAlways
	return policy.Plan{Node: "node-a", VirtualServers: append(sp.VirtualServers, np)}
}

var (
	recordedNodePort = "192.168.100.1:30080/TCP"
	// foreignOnNode are someone else's virtual servers on the same node
	// address: another port, and the same port with another protocol.
	foreignOnNode = []ipvs.Key{
		{Address: netip.MustParseAddr("192.168.100.1"), Protocol: policy.ProtocolTCP, Port: 22},
		{Address: netip.MustParseAddr("192.168.100.1"), Protocol: policy.ProtocolUDP, Port: 30080},
	}
)

func (f *fakes) addForeign(t *testing.T) {
	t.Helper()
	for _, k := range foreignOnNode {
		if err := f.kernel.AddVirtualServer(ipvs.VirtualServer{Key: k, Scheduler: "wlc"}); err != nil {
			t.Fatal(err)
		}
	}
}

// virtualServers lists the fake kernel's virtual servers.
func (f *fakes) virtualServers(t *testing.T) []string {
	t.Helper()
	vss, err := f.kernel.VirtualServers()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, v := range vss {
		out = append(out, v.Key.String())
	}
	slices.Sort(out)
	return out
}

func (f *fakes) hasTable() bool {
	return strings.Contains(f.nft.Dump(), "table inet "+nft.TableName+"\n")
}

// Cleanup in a fresh process deletes the NodePort virtual servers the
// nftables table records, keeps foreign ones on the same node address,
// and deletes the table only once the record is no longer needed.
func TestDataPlaneCleanupDeletesRecordedNodePorts(t *testing.T) {
	foreign := []string{"192.168.100.1:22/TCP", "192.168.100.1:30080/UDP"}
	all := []string{"192.168.100.1:22/TCP", recordedNodePort, "192.168.100.1:30080/UDP"} // sorted
	for _, tc := range []struct {
		name      string
		before    func(f *fakes) // after the first run, before the fresh process
		wantErr   string
		wantVSs   []string
		wantTable bool
	}{
		{name: "the recorded NodePort goes, foreign ones stay, the table goes",
			before: func(*fakes) {}, wantVSs: foreign},
		{name: "no table (an older version): the NodePort cannot be told from foreign ones and stays",
			before: func(f *fakes) {
				if err := nft.New(nft.Config{}, f.nft).Cleanup(); err != nil {
					t.Fatal(err)
				}
			}, wantVSs: all},
		{name: "an unreadable record keeps the table and the NodePort",
			before:  func(f *fakes) { f.nft.FailNextRead(errors.New("netlink: no buffer space")) },
			wantErr: "nftables: read recorded NodePort virtual servers (table inet kube-ipvs-proxy kept): read set nodeport-services-v4",
			wantVSs: all, wantTable: true},
		{name: "a failed delete keeps the table for a rerun",
			before: func(f *fakes) {
				f.kernel.Fault = func(op, target string) error {
					if op == "delete-service" && target == recordedNodePort {
						return syscall.EPERM
					}
					return nil
				}
			},
			wantErr: "ipvs (table inet kube-ipvs-proxy kept: it records NodePort virtual servers still to delete): delete virtual server 192.168.100.1:30080/TCP",
			wantVSs: all, wantTable: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakes(t)
			if err := f.dp.Resync(webWithNodePort("10.244.1.5")); err != nil {
				t.Fatalf("Resync: %v", err)
			}
			f.addForeign(t)
			tc.before(&f)
			f.restart()
			err := f.dp.Cleanup()
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Cleanup: %v, want error %q", err, tc.wantErr)
			}
			if got := f.virtualServers(t); !slices.Equal(got, tc.wantVSs) {
				t.Errorf("virtual servers after Cleanup: %v, want %v", got, tc.wantVSs)
			}
			if f.hasTable() != tc.wantTable {
				t.Errorf("table inet %s exists %t, want %t", nft.TableName, f.hasTable(), tc.wantTable)
			}
			if !tc.wantTable {
				return
			}
			// The kept record lets a rerun finish the job.
			f.kernel.Fault = nil
			f.restart()
			if err := f.dp.Cleanup(); err != nil {
				t.Fatalf("second Cleanup: %v", err)
			}
			if got := f.virtualServers(t); !slices.Equal(got, foreign) || f.hasTable() {
				t.Errorf("after the second Cleanup: virtual servers %v (want %v), table %t (want false)", got, foreign, f.hasTable())
			}
		})
	}
}

// A restarted proxy whose plan lost a NodePort while it was down deletes
// the stale NodePort virtual server, which the table recorded as ours,
// and nothing foreign; only the first Resync reads the record.
func TestDataPlaneRestartDeletesStaleRecordedNodePort(t *testing.T) {
	f := newFakes(t)
	if err := f.dp.Resync(webWithNodePort("10.244.1.5")); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	f.addForeign(t)
	f.restart()
	sp := webPlan("10.244.1.5")
	if err := f.dp.Resync(policy.Plan{Node: "node-a", VirtualServers: sp.VirtualServers}); err != nil {
		t.Fatalf("Resync after restart: %v", err)
	}
	want := []string{"10.96.0.1:80/TCP", "192.168.100.1:22/TCP", "192.168.100.1:30080/UDP"}
	if got := f.virtualServers(t); !slices.Equal(got, want) {
		t.Errorf("virtual servers after the restart: %v, want %v", got, want)
	}
	if strings.Contains(f.nft.Dump(), "192.168.100.1") {
		t.Errorf("the table still records the deleted NodePort:\n%s", f.nft.Dump())
	}
	f.nft.FailNextRead(errors.New("must not be read again"))
	if err := f.dp.Resync(policy.Plan{Node: "node-a", VirtualServers: sp.VirtualServers}); err != nil {
		t.Errorf("second Resync read the record again: %v", err)
	}
}
