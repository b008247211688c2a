//go:build integration

package nftwriter

import (
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// TestRecordedNodePortsReadBack reads the nodeport-services record from
// the real kernel through a second writer (a fresh process): nothing
// without our table or without the sets (a table of an older version,
// whose ENOENT must be told from a failure), the plan's NodePorts after a
// Resync, and what Apply leaves.
func TestRecordedNodePortsReadBack(t *testing.T) {
	w := newWriter(t) // deletes our table when the test ends
	fresh, err := nft.NewLinux(testConfig)
	if err != nil {
		t.Fatalf("NewLinux: %v", err)
	}
	read := func(step string) string {
		t.Helper()
		keys, err := fresh.RecordedNodePorts()
		if err != nil {
			t.Fatalf("%s: RecordedNodePorts: %v", step, err)
		}
		var s []string
		for _, k := range keys {
			s = append(s, k.String())
		}
		got := strings.Join(s, " ")
		t.Logf("%s: recorded [%s]", step, got)
		return got
	}
	if got := read("no table"); got != "" {
		t.Errorf("no table: recorded %q, want nothing", got)
	}
	c := newConn(t)
	c.AddTable(ourTable)
	err = c.AddSet(&nftables.Set{Table: ourTable, Name: "service-ips-v4", KeyType: nftables.TypeIPAddr}, nil)
	if err == nil {
		err = c.Flush()
	}
	if err != nil {
		t.Fatalf("a table of an older version: %v", err)
	}
	if got := read("a table without the record"); got != "" {
		t.Errorf("a table without the record: recorded %q, want nothing", got)
	}
	plan := fullPlan()
	if err := w.Resync(plan); err != nil {
		t.Fatalf("Resync: %v", err)
	}
	if got, want := read("after Resync"), "192.168.1.10:30080/TCP [fd00:1::10]:30080/TCP"; got != want {
		t.Errorf("after Resync: recorded %q, want %q", got, want)
	}
	udp := servicePlan(plan, "default/local")
	udp.VirtualServers = udp.VirtualServers[:1]
	udp.VirtualServers[0].Protocol, udp.VirtualServers[0].Port = policy.ProtocolUDP, 30053
	if err := w.Apply([]policy.ServicePlan{udp}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if got, want := read("after Apply"), "192.168.1.10:30053/UDP"; got != want {
		t.Errorf("after Apply: recorded %q, want %q", got, want)
	}
	if err := w.Cleanup(); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	if got := read("after Cleanup"); got != "" {
		t.Errorf("after Cleanup: recorded %q, want nothing", got)
	}
}
