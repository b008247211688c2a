package nft

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/nftables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"golang.org/x/sys/unix"
)

// nodePort is a TCP NodePort virtual server with no destinations.
func nodePort(service, address string, port uint16) policy.VirtualServer {
	v := vs(service, address, port)
	v.Kind, v.Masquerade = policy.KindNodePort, policy.MasqueradeAlways
	return v
}

// recorded lists the nodeport-services elements of the fake, as
// "set: element".
func recorded(f *Fake) []string {
	var out []string
	set := ""
	for _, line := range strings.Split(f.Dump(), "\n") {
		switch {
		case strings.HasPrefix(line, "\tset "), strings.HasPrefix(line, "\tmap "), strings.HasPrefix(line, "\tchain "):
			set = strings.Fields(line)[1]
		case strings.HasPrefix(line, "\t\t") && strings.HasPrefix(set, setNodePortServices+"-"):
			out = append(out, set+": "+strings.TrimSpace(line))
		}
	}
	return out
}

// The nodeport-services sets follow the plan's NodePort virtual servers
// through Apply: added with their service, removed with it, moved when a
// node port changes, and kept while another holder remains.
func TestNodePortRecordFollowsApply(t *testing.T) {
	const a, b = "default/a", "default/b"
	sp := func(service string, vss ...policy.VirtualServer) policy.ServicePlan {
		return policy.ServicePlan{Service: key(service), VirtualServers: vss}
	}
	steps := []struct {
		name    string
		changes []policy.ServicePlan
		want    []string
	}{
		{name: "ClusterIP only: nothing recorded", changes: []policy.ServicePlan{sp(a, vs(a, "10.96.0.1", 80))}},
		{name: "NodePorts of both families are recorded", changes: []policy.ServicePlan{sp(a, vs(a, "10.96.0.1", 80),
			nodePort(a, "192.168.1.10", 30080), nodePort(a, "fd00:1::10", 30080))}, want: []string{
			"nodeport-services-v4: 192.168.1.10 . tcp . 30080", "nodeport-services-v6: fd00:1::10 . tcp . 30080"}},
		{name: "a changed node port moves the element", changes: []policy.ServicePlan{sp(a, vs(a, "10.96.0.1", 80),
			nodePort(a, "192.168.1.10", 30081), nodePort(a, "fd00:1::10", 30081))}, want: []string{
			"nodeport-services-v4: 192.168.1.10 . tcp . 30081", "nodeport-services-v6: fd00:1::10 . tcp . 30081"}},
		{name: "a second holder of the same key", changes: []policy.ServicePlan{sp(b, nodePort(b, "192.168.1.10", 30081))}, want: []string{
			"nodeport-services-v4: 192.168.1.10 . tcp . 30081", "nodeport-services-v6: fd00:1::10 . tcp . 30081"}},
		{name: "the first holder leaves: the shared key stays", changes: []policy.ServicePlan{{Service: key(a)}}, want: []string{
			"nodeport-services-v4: 192.168.1.10 . tcp . 30081"}},
		{name: "the last holder leaves: nothing recorded", changes: []policy.ServicePlan{{Service: key(b)}}},
	}
	w, f := resynced(t, policy.Plan{Node: "node-a"})
	for _, s := range steps {
		if err := w.Apply(s.changes); err != nil {
			t.Fatalf("%s: Apply: %v", s.name, err)
		}
		if diff := cmp.Diff(s.want, recorded(f)); diff != "" {
			t.Errorf("%s: recorded NodePorts (-want +got):\n%s", s.name, diff)
		}
	}
}

// RecordedNodePorts reads the record from the kernel (the fake's
// committed state), in any process: a fresh writer reads what another
// one wrote.
func TestRecordedNodePorts(t *testing.T) {
	table := &nftables.Table{Family: nftables.TableFamilyINet, Name: TableName}
	udp := nodePort("default/dns", "192.168.1.10", 30053)
	udp.Protocol = policy.ProtocolUDP
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, f *Fake)
		want    []string
		wantErr string // a substring of the error; none without
		wantIs  error
	}{
		{name: "no table: nothing recorded", setup: func(*testing.T, *Fake) {}},
		{name: "a Resync's NodePorts, sorted", setup: func(t *testing.T, f *Fake) {
			plan := fullPlan()
			plan.VirtualServers = append(plan.VirtualServers, udp)
			mustResync(t, f, plan)
		}, want: []string{"192.168.1.10:30080/TCP", "192.168.1.10:30053/UDP", "[fd00:1::10]:30080/TCP"}},
		{name: "a plan without NodePorts records none", setup: func(t *testing.T, f *Fake) { mustResync(t, f, manyServices(3)) }},
		{name: "after Cleanup: nothing recorded", setup: func(t *testing.T, f *Fake) {
			mustResync(t, f, fullPlan())
			if err := New(testConfig, f).Cleanup(); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a table without the sets (an older version): nothing recorded", setup: func(t *testing.T, f *Fake) {
			f.AddTable(table)
			if err := f.Flush(); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a failed read is an error", setup: func(t *testing.T, f *Fake) {
			mustResync(t, f, fullPlan())
			f.FailNextRead(unix.ENOBUFS)
		}, wantErr: "read set nodeport-services-v4 of table inet kube-ipvs-proxy", wantIs: unix.ENOBUFS},
		{name: "a malformed element is an error", setup: func(t *testing.T, f *Fake) {
			mustResync(t, f, fullPlan())
			s := newSets(table)[idOf(setNodePortServices, familyV4)]
			bad := keyBuf(nil).addr(addr("192.168.1.11")).proto(unix.IPPROTO_ICMP).port(1)
			if err := f.SetAddElements(s, []nftables.SetElement{{Key: bad}}); err != nil {
				t.Fatal(err)
			}
			if err := f.Flush(); err != nil {
				t.Fatal(err)
			}
		}, wantErr: "set nodeport-services-v4 of table inet kube-ipvs-proxy: element c0a8010b01000000" + "00010000: protocol 1 is not tcp, udp or sctp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFake()
			tc.setup(t, f)
			got, err := New(testConfig, f).RecordedNodePorts()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || (tc.wantIs != nil && !errors.Is(err, tc.wantIs)) {
					t.Fatalf("RecordedNodePorts: %v, want an error containing %q (is %v)", err, tc.wantErr, tc.wantIs)
				}
			} else if err != nil {
				t.Fatalf("RecordedNodePorts: %v", err)
			}
			var texts []string
			for _, k := range got {
				texts = append(texts, k.String())
			}
			if diff := cmp.Diff(tc.want, texts); diff != "" {
				t.Errorf("RecordedNodePorts (-want +got):\n%s", diff)
			}
		})
	}
}

func mustResync(t *testing.T, f *Fake, plan policy.Plan) {
	t.Helper()
	if err := New(testConfig, f).Resync(plan); err != nil {
		t.Fatalf("Resync: %v", err)
	}
}

func TestDecodeVSKey(t *testing.T) {
	for _, tc := range []struct {
		name    string
		key     []byte
		fam     *family
		want    string
		wantErr string
	}{
		{name: "IPv4 TCP", key: keyBuf(nil).addr(addr("192.168.1.10")).proto(unix.IPPROTO_TCP).port(30080), fam: familyV4, want: "192.168.1.10:30080/TCP"},
		{name: "IPv6 SCTP", key: keyBuf(nil).addr(addr("fd00:1::10")).proto(unix.IPPROTO_SCTP).port(65535), fam: familyV6, want: "[fd00:1::10]:65535/SCTP"},
		{name: "IPv4 key in the v6 set", key: keyBuf(nil).addr(addr("192.168.1.10")).proto(unix.IPPROTO_UDP).port(1), fam: familyV6, wantErr: "12 bytes, want 24"},
		{name: "unknown protocol", key: keyBuf(nil).addr(addr("192.168.1.10")).proto(unix.IPPROTO_ICMP).port(1), fam: familyV4, wantErr: "protocol 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeVSKey(tc.key, tc.fam)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("decodeVSKey: %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got.String() != tc.want {
				t.Errorf("decodeVSKey = %s, %v; want %s", got, err, tc.want)
			}
		})
	}
}
