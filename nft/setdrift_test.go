package nft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// variedServices returns a plan of n services of every kind, so that
// every set and map of both families holds elements: ClusterIPs with a
// local and a remote destination, ClusterIPs without destinations
// (rejected or dropped), NodePorts with an internal-via ClusterIP and
// NOTRACK LoadBalancers with source ranges; every fifth service also
// has an IPv6 virtual server.
func variedServices(n int) policy.Plan {
	var vss []policy.VirtualServer
	for i := range n {
		hi, lo := byte(i>>8), byte(i)
		a4 := func(a byte) netip.Addr { return netip.AddrFrom4([4]byte{10, a, hi, lo}) }
		a6 := func(a byte) netip.Addr {
			return netip.AddrFrom16([16]byte{0xfd, 0, 0, a, 14: hi, 15: lo})
		}
		name := fmt.Sprintf("ns/svc-%d", i)
		for _, a := range []func(byte) netip.Addr{a4, a6} {
			if a(0).Is6() && i%5 != 3 {
				continue
			}
			var v policy.VirtualServer
			switch i % 4 {
			case 0:
				v = vs(name, a(96).String(), 80, dest(a(244).String(), 8080), remoteDest(a(245).String(), 8080))
			case 1:
				v = vs(name, a(96).String(), 80)
				if i%8 == 5 {
					v.WhenEmpty = policy.EmptyDrop
				}
			case 2:
				v = vs(name, a(168).String(), 30080, dest(a(244).String(), 8080))
				v.Kind, v.Masquerade = policy.KindNodePort, policy.MasqueradeNever
				v.InternalVia = netip.AddrPortFrom(a(97), 80)
			case 3:
				v = vs(name, a(64).String(), 443, dest(a(244).String(), 8443))
				v.Kind, v.Masquerade, v.NoTrack = policy.KindLoadBalancer, policy.MasqueradeAlways, true
				v.SourceRanges = []netip.Prefix{netip.PrefixFrom(a(200), 24).Masked(), netip.PrefixFrom(a(201), a(0).BitLen())}
			}
			vss = append(vss, v)
		}
	}
	policy.SortVirtualServers(vss)
	return policy.Plan{Node: "node-a", VirtualServers: vss}
}

// replayConn serves EachSetElement from a copy of the Fake's elements,
// with verdicts raw in Val as the kernel readers give them, allocating
// nothing: what setDrift costs over a kernel reader, less the kernel.
type replayConn struct {
	*Fake
	sets map[string][]nftables.SetElement
}

func newReplayConn(t testing.TB, f *Fake) *replayConn {
	t.Helper()
	r := &replayConn{Fake: f, sets: map[string][]nftables.SetElement{}}
	for _, s := range newSets(&nftables.Table{Family: nftables.TableFamilyINet, Name: TableName}) {
		elems, err := f.GetSetElements(s)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range elems {
			if e.VerdictData != nil {
				elems[i].Val, elems[i].VerdictData = rawVerdictAttrs(t, e.VerdictData), nil
			}
		}
		r.sets[s.Name] = elems
	}
	return r
}

// rawVerdictAttrs encodes a verdict as the kernel sends it in a verdict
// map element's NFTA_DATA_VERDICT.
func rawVerdictAttrs(t testing.TB, v *expr.Verdict) []byte {
	ae := netlink.NewAttributeEncoder()
	ae.ByteOrder = binary.BigEndian
	ae.Uint32(unix.NFTA_VERDICT_CODE, uint32(int32(v.Kind)))
	if v.Chain != "" {
		ae.String(unix.NFTA_VERDICT_CHAIN, v.Chain)
	}
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (r *replayConn) EachSetElement(s *nftables.Set, each func(nftables.SetElement) error) error {
	for _, e := range r.sets[s.Name] {
		if err := each(e); err != nil {
			return err
		}
	}
	return nil
}

// TestSetDriftAllocatesNothingPerMatchingElement: reading a table that
// matches the mirror costs as many allocations at 4,000 services as at
// 1,000, in every kind of set and map: none per element.
func TestSetDriftAllocatesNothingPerMatchingElement(t *testing.T) {
	allocs := map[int]float64{}
	for _, n := range []int{1000, 4000} {
		w, f := resynced(t, variedServices(n))
		r := newReplayConn(t, f)
		w.conn = r
		sets := newSets(w.table)
		read := 0
		for id, s := range sets {
			if len(r.sets[s.Name]) == 0 && setID(id).def().base != setClusterCIDRs {
				t.Fatalf("set %s is empty: the plan does not cover it", s.Name)
			}
			read += len(r.sets[s.Name])
		}
		allocs[n] = testing.AllocsPerRun(3, func() {
			for id, s := range sets {
				if d, _, err := w.setDrift(w.mirror, setID(id), s); err != nil || len(d.add)+len(d.del) > 0 {
					t.Fatalf("set %s: drift %+v, %v; want none", s.Name, d, err)
				}
			}
		})
		t.Logf("%d services: %d elements read with %v allocations", n, read, allocs[n])
	}
	if allocs[4000] != allocs[1000] {
		t.Errorf("%v allocations at 4,000 services, %v at 1,000: want as many", allocs[4000], allocs[1000])
	}
}

// interruptingConn makes the next interrupts reads of one set report
// ErrDumpInterrupted, after handing each one real element and one that
// is not ours, as a dump cut short by a change could.
type interruptingConn struct {
	*Fake
	set        string
	interrupts int
}

func (c *interruptingConn) EachSetElement(s *nftables.Set, each func(nftables.SetElement) error) error {
	if c.interrupts == 0 || s.Name != c.set {
		return c.Fake.EachSetElement(s, each)
	}
	c.interrupts--
	first := true
	err := c.Fake.EachSetElement(s, func(e nftables.SetElement) error {
		if !first {
			return nil
		}
		first = false
		return each(e)
	})
	if err != nil {
		return err
	}
	if err := each(nftables.SetElement{Key: []byte{1}}); err != nil {
		return err
	}
	return fmt.Errorf("list elements of set %s: %w", s.Name, ErrDumpInterrupted)
}

// TestRepairReadsAnInterruptedSetAgain: a set whose dump the kernel marks
// interrupted is read again from the start, and the repair finds the
// drift it would have found; a set interrupted readAttempts times in a
// row is a failed read, and the table is rebuilt.
func TestRepairReadsAnInterruptedSetAgain(t *testing.T) {
	servicePorts, cidrs := idOf(setServicePorts, familyV4).name(), idOf(setClusterCIDRs, familyV4).name()
	for _, tc := range []struct {
		name       string
		set        string
		interrupts int
		rebuilt    bool
	}{
		{"no interruption", servicePorts, 0, false},
		{"one interruption", servicePorts, 1, false},
		{"interrupted on all attempts but the last", servicePorts, readAttempts - 1, false},
		{"cluster CIDRs interrupted on all attempts but the last", cidrs, readAttempts - 1, false},
		{"interrupted on every attempt", servicePorts, readAttempts, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, f := resynced(t, fullPlan())
			want := f.Dump()
			handEdit(t, f, func(sets []*nftables.Set, _ *nftables.Table) {
				_ = f.SetDeleteElements(sets[idOf(setServicePorts, familyV4)], []nftables.SetElement{{Key: servicePort4("192.0.2.2", 80)}})
			})
			w.conn = &interruptingConn{Fake: f, set: tc.set, interrupts: tc.interrupts}
			if err := w.Repair(); err != nil {
				t.Fatal(err)
			}
			st := w.LastResync()
			switch {
			case st.Rebuilt != tc.rebuilt:
				t.Errorf("LastResync %+v, want rebuilt %v", st, tc.rebuilt)
			case tc.rebuilt && !strings.Contains(st.Reason, ErrDumpInterrupted.Error()):
				t.Errorf("rebuilt for %q, want an interrupted read", st.Reason)
			case !tc.rebuilt && (st.Added != 1 || st.Deleted != 0):
				t.Errorf("LastResync %+v, want the one deleted element added back", st)
			}
			if got := f.Dump(); got != want {
				t.Errorf("table after the repair differs from the plan's:\n%s", got)
			}
		})
	}
}

// TestFakeElementsAreValidOnlyDuringTheCall: the Fake's EachSetElement,
// like the kernel reader, hands out bytes it overwrites after the call.
func TestFakeElementsAreValidOnlyDuringTheCall(t *testing.T) {
	_, f := resynced(t, fullPlan())
	s := newSets(&nftables.Table{Family: nftables.TableFamilyINet, Name: TableName})[idOf(setServicePorts, familyV4)]
	var kept [][]byte
	var copies []string
	err := f.EachSetElement(s, func(e nftables.SetElement) error {
		kept, copies = append(kept, e.Key), append(copies, string(e.Key))
		return nil
	})
	if err != nil || len(kept) == 0 {
		t.Fatalf("EachSetElement: %d elements, %v", len(kept), err)
	}
	for i := range kept {
		if string(kept[i]) == copies[i] {
			t.Errorf("element %d's key %x kept its bytes after the call", i, kept[i])
		}
	}
	table := &nftables.Table{Family: nftables.TableFamilyINet, Name: "missing"}
	if err := f.EachSetElement(&nftables.Set{Table: table, Name: s.Name}, nil); !errors.Is(err, unix.ENOENT) {
		t.Errorf("a missing table: %v, want ENOENT", err)
	}
}
