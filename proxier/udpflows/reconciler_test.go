package udpflows

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// flow is a flow from client 192.168.0.10:40000 to dst, answered by
// replySrc and masqueraded to the node's 192.168.0.1 (IPv6: the same
// under fd00::).
func flow(proto policy.Protocol, dst, replySrc string) Flow {
	client, node := ap("192.168.0.10:40000"), ap("192.168.0.1:40000")
	if ap(dst).Addr().Is6() {
		client, node = ap("[fd00::10]:40000"), ap("[fd00::1]:40000")
	}
	return Flow{Protocol: proto, OrigSrc: client, OrigDst: ap(dst), ReplySrc: ap(replySrc), ReplyDst: node}
}

// rules: default/dns on 10.96.0.53:53 and its NodePort on 192.168.0.1,
// served by 10.244.1.1 (ready) and 10.244.2.2 (serving, terminating);
// default/v6 on [fd00:96::53]:53 served by [fd00:244::1]:5353.
func rules() policy.StaleUDPFlows {
	serving := []netip.AddrPort{ap("10.244.1.1:5353"), ap("10.244.2.2:5353")}
	return policy.NewStaleUDPFlows(slices.Values([][]policy.UDPServing{
		{{Frontend: ap("10.96.0.53:53"), Endpoints: serving}, {Frontend: ap("192.168.0.1:30053"), Endpoints: serving}},
		{{Frontend: ap("[fd00:96::53]:53"), Endpoints: []netip.AddrPort{ap("[fd00:244::1]:5353")}}},
	}))
}

func lines(flows ...Flow) string {
	var s []string
	for _, f := range flows {
		s = append(s, f.String()+"\n")
	}
	slices.Sort(s)
	return strings.Join(s, "")
}

// TestReconcileDeletesExactlyTheStaleUDPFlows: of a table holding flows
// of every kind, only the UDP flows to our virtual servers replied from
// no serving endpoint go, in both families, and each family's count says
// so.
func TestReconcileDeletesExactlyTheStaleUDPFlows(t *testing.T) {
	keep := []Flow{
		flow(policy.ProtocolUDP, "10.96.0.53:53", "10.244.1.1:5353"),     // a serving endpoint
		flow(policy.ProtocolUDP, "10.96.0.53:53", "10.244.2.2:5353"),     // serving, terminating
		flow(policy.ProtocolUDP, "192.168.0.1:30053", "10.244.2.2:5353"), // the NodePort, serving
		flow(policy.ProtocolUDP, "10.244.3.3:5353", "10.244.3.3:5353"),   // straight to a pod: not ours
		flow(policy.ProtocolUDP, "192.168.0.1:53", "192.168.0.1:53"),     // the node's own DNS: not ours
		flow(policy.ProtocolTCP, "10.96.0.53:53", "10.244.3.3:5353"),     // TCP: never
		flow(policy.ProtocolUDP, "[fd00:96::53]:53", "[fd00:244::1]:5353"),
	}
	gone := []Flow{
		flow(policy.ProtocolUDP, "10.96.0.53:53", "10.244.3.3:5353"),     // no longer serving
		flow(policy.ProtocolUDP, "192.168.0.1:30053", "10.244.3.3:5353"), // the same through the NodePort
		flow(policy.ProtocolUDP, "10.96.0.53:53", "10.96.0.53:53"),       // sent while there was no endpoint
		flow(policy.ProtocolUDP, "[fd00:96::53]:53", "[fd00:244::2]:5353"),
	}
	table := NewFakeTable(slices.Concat(keep, gone)...)
	clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
	got, err := New(table, clk).Reconcile(rules())
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if d := cmp.Diff(lines(keep...), table.Dump()); d != "" {
		t.Errorf("flows left (-want +got):\n%s", d)
	}
	want := []Result{{Family: corev1.IPv4Protocol, Deleted: 3}, {Family: corev1.IPv6Protocol, Deleted: 1}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("results (-want +got):\n%s", d)
	}
}

// TestReconcileReadsOnlyFamiliesWithRules: a family without UDP virtual
// servers is not walked (its table may be large, and nothing in it can be
// ours), and rules with none walk nothing.
func TestReconcileReadsOnlyFamiliesWithRules(t *testing.T) {
	v4only := policy.NewStaleUDPFlows(slices.Values([][]policy.UDPServing{
		{{Frontend: ap("10.96.0.53:53"), Endpoints: []netip.AddrPort{ap("10.244.1.1:5353")}}}}))
	for _, tc := range []struct {
		name     string
		rules    policy.StaleUDPFlows
		families []corev1.IPFamily
	}{
		{"IPv4 rules walk IPv4 only", v4only, []corev1.IPFamily{corev1.IPv4Protocol}},
		{"no rules walk nothing", policy.StaleUDPFlows{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := NewFakeTable(flow(policy.ProtocolUDP, "[fd00:96::53]:53", "[fd00:244::2]:5353"))
			got, err := New(table, clocktesting.NewFakePassiveClock(time.Unix(0, 0))).Reconcile(tc.rules)
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			var fams []corev1.IPFamily
			for _, r := range got {
				fams = append(fams, r.Family)
			}
			if !slices.Equal(fams, tc.families) || table.Walks() != len(tc.families) {
				t.Errorf("families %v in %d walks, want %v", fams, table.Walks(), tc.families)
			}
			if table.Dump() == "" {
				t.Error("the IPv6 flow went, with no IPv6 rule")
			}
		})
	}
}

// TestReconcileFailureNamesTheFamilyAndStillReports: a failed walk is an
// error naming its family; each family still has its result, for the
// metrics.
func TestReconcileFailureNamesTheFamilyAndStillReports(t *testing.T) {
	table := NewFakeTable()
	errDump := errors.New("dump failed")
	table.Fail(errDump)
	got, err := New(table, clocktesting.NewFakePassiveClock(time.Unix(0, 0))).Reconcile(rules())
	if !errors.Is(err, errDump) || !strings.Contains(err.Error(), "IPv4") || !strings.Contains(err.Error(), "IPv6") {
		t.Errorf("Reconcile error = %v, want the dump's, naming IPv4 and IPv6", err)
	}
	if len(got) != 2 {
		t.Errorf("results = %v, want one per family", got)
	}
}
