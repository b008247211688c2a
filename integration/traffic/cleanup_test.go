//go:build integration

package traffic

import (
	"net"
	"net/netip"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/moby/ipvs"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
)

// TestCleanupDeletesRecordedNodePorts: a data plane programs NodePort
// virtual servers on node-a's addresses and is closed without cleanup (a
// stopped proxy); a foreign virtual server sits on the same node address
// with another port, and one with the same port and another protocol. A
// new data plane's Cleanup (a fresh `--cleanup` process) reads the
// NodePorts from our table's record, deletes exactly those, keeps the
// foreign ones, and removes the table.
func TestCleanupDeletesRecordedNodePorts(t *testing.T) {
	l := newLab(t)
	node4 := l.root.v4
	l.setService(service("np", []string{"10.96.9.3", "fd00:96::9:3"}, nodePorts(30084, 30054)), l.ep("pod-b1"), l.ep6("pod-b1"))
	plan, ws := l.engine.Compute()
	if len(ws) > 0 {
		t.Fatalf("plan warnings: %v", ws)
	}
	cfg := proxier.DataPlaneConfig{Interface: "kube-ipvs0", ClusterCIDRs: clusterCIDRs, GracefulPeriod: time.Second}
	first, err := proxier.NewDataPlane(cfg)
	if err != nil {
		t.Fatalf("NewDataPlane: %v", err)
	}
	if err := first.Resync(plan); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	l.expectOnly(t, l.client, hostPort(node4, 30084), TCP, 5, "pod-b1")
	first.Close() // stopped without cleanup: the kernel keeps it all

	ipv, err := ipvs.New("")
	if err != nil {
		t.Fatalf("ipvs handle: %v", err)
	}
	defer ipv.Close()
	foreign := []*ipvs.Service{
		{Address: node4.AsSlice(), Protocol: unix.IPPROTO_TCP, Port: 30999, AddressFamily: unix.AF_INET, SchedName: "rr", Netmask: 0xffffffff},
		{Address: node4.AsSlice(), Protocol: unix.IPPROTO_UDP, Port: 30084, AddressFamily: unix.AF_INET, SchedName: "rr", Netmask: 0xffffffff},
	}
	for _, s := range foreign {
		if err := ipv.NewService(s); err != nil {
			t.Fatalf("foreign virtual server: %v", err)
		}
	}
	// Registered after newLab's cleanup, so it runs first: the lab then
	// checks that no virtual server is left.
	t.Cleanup(func() {
		h, err := ipvs.New("")
		if err != nil {
			t.Errorf("ipvs handle: %v", err)
			return
		}
		defer h.Close()
		for _, s := range foreign {
			if err := h.DelService(s); err != nil {
				t.Errorf("delete the foreign virtual server %s:%d: %v", s.Address, s.Port, err)
			}
		}
	})
	before := ipvsKeys(t, ipv)
	t.Logf("IPVS before cleanup: %v", before)

	// What the fresh process will read: the table's record.
	reader, err := nft.NewLinux(nft.Config{})
	if err != nil {
		t.Fatalf("nft.NewLinux: %v", err)
	}
	recorded, err := reader.RecordedNodePorts()
	if err != nil {
		t.Fatalf("RecordedNodePorts: %v", err)
	}
	t.Logf("recorded in table inet %s: %v", nft.TableName, recorded)
	var wantRecorded []string
	for _, vs := range plan.VirtualServers {
		if vs.Kind == policy.KindNodePort {
			wantRecorded = append(wantRecorded, vs.Key().String())
		}
	}
	var gotRecorded []string
	for _, k := range recorded {
		gotRecorded = append(gotRecorded, k.String())
	}
	slices.Sort(wantRecorded)
	slices.Sort(gotRecorded)
	if len(wantRecorded) != 4 || !slices.Equal(gotRecorded, wantRecorded) {
		t.Errorf("recorded NodePorts %v, want the plan's 4: %v", gotRecorded, wantRecorded)
	}

	fresh, err := proxier.NewDataPlane(cfg)
	if err != nil {
		t.Fatalf("NewDataPlane (fresh): %v", err)
	}
	defer fresh.Close()
	if err := fresh.Cleanup(); err != nil {
		t.Fatalf("Cleanup (fresh): %v", err)
	}
	after := ipvsKeys(t, ipv)
	t.Logf("IPVS after cleanup: %v", after)
	want := []string{hostPort(node4, 30084) + "/UDP", hostPort(node4, 30999) + "/TCP"}
	slices.Sort(want)
	if !slices.Equal(after, want) {
		t.Errorf("after Cleanup IPVS holds %v, want only the foreign %v", after, want)
	}
	conn, err := nftables.New()
	if err != nil {
		t.Fatalf("nftables: %v", err)
	}
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		t.Fatalf("list tables: %v", err)
	}
	for _, tb := range tables {
		if tb.Name == nft.TableName {
			t.Errorf("table inet %s still exists after Cleanup", nft.TableName)
		}
	}
	if _, err := net.InterfaceByName("kube-ipvs0"); err == nil {
		t.Errorf("kube-ipvs0 still exists after Cleanup")
	}
	// Nothing answers on the NodePort now: the host refuses it.
	l.expectFastFailure(t, l.client, TCP, hostPort(node4, 30084))
}

// ipvsKeys lists the kernel's virtual servers as addr:port/PROTO, sorted.
func ipvsKeys(t *testing.T, h *ipvs.Handle) []string {
	t.Helper()
	svcs, err := h.GetServices()
	if err != nil {
		t.Fatalf("list IPVS services: %v", err)
	}
	var out []string
	for _, s := range svcs {
		proto := map[uint16]string{unix.IPPROTO_TCP: "TCP", unix.IPPROTO_UDP: "UDP", unix.IPPROTO_SCTP: "SCTP"}[s.Protocol]
		out = append(out, net.JoinHostPort(s.Address.String(), strconv.Itoa(int(s.Port)))+"/"+proto)
	}
	slices.Sort(out)
	return out
}

// TestCleanupTableOnlyLeavesIPVSServing: after a rollback to kube-proxy,
// which owns the IPVS virtual servers and kube-ipvs0 again, `--cleanup
// --cleanup-table-only` (a fresh process) removes our nftables table and
// nothing else: the virtual servers, their destinations and kube-ipvs0
// stay, and the ClusterIP still answers a pod.
func TestCleanupTableOnlyLeavesIPVSServing(t *testing.T) {
	l := newLab(t)
	l.setService(service("web", []string{"10.96.9.4", "fd00:96::9:4"}), l.ep("pod-b1"), l.ep6("pod-b1"))
	plan, ws := l.engine.Compute()
	if len(ws) > 0 {
		t.Fatalf("plan warnings: %v", ws)
	}
	cfg := proxier.DataPlaneConfig{Interface: "kube-ipvs0", ClusterCIDRs: clusterCIDRs, GracefulPeriod: time.Second}
	first, err := proxier.NewDataPlane(cfg)
	if err != nil {
		t.Fatalf("NewDataPlane: %v", err)
	}
	if err := first.Resync(plan); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	first.Close()
	ipv, err := ipvs.New("")
	if err != nil {
		t.Fatalf("ipvs handle: %v", err)
	}
	defer ipv.Close()
	before := ipvsKeys(t, ipv)

	fresh, err := proxier.NewDataPlane(cfg)
	if err != nil {
		t.Fatalf("NewDataPlane (fresh): %v", err)
	}
	defer fresh.Close()
	removed, err := fresh.CleanTable(false)
	if err != nil {
		t.Fatalf("CleanTable: %v", err)
	}
	if got := removed.Lines(); !slices.Equal(got, []string{"nftables table inet " + nft.TableName}) {
		t.Errorf("CleanTable removed %v; want only the table", got)
	}
	conn, err := nftables.New()
	if err != nil {
		t.Fatalf("nftables: %v", err)
	}
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		t.Fatalf("list tables: %v", err)
	}
	for _, tb := range tables {
		if tb.Name == nft.TableName {
			t.Errorf("table inet %s still exists after CleanTable", nft.TableName)
		}
	}
	if after := ipvsKeys(t, ipv); !slices.Equal(after, before) || len(after) != 4 {
		t.Errorf("IPVS holds %v after CleanTable; want the 4 it held before: %v", after, before)
	}
	if _, err := net.InterfaceByName("kube-ipvs0"); err != nil {
		t.Errorf("kube-ipvs0 is gone after CleanTable: %v", err)
	}
	// From a pod: its traffic needs no masquerade, which went with the
	// table (kube-proxy's own rules bring it back after a rollback).
	l.expectOnly(t, l.pod("pod-a1"), hostPort(netip.MustParseAddr("10.96.9.4"), 80), TCP, 5, "pod-b1")
}
