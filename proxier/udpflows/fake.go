package udpflows

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// Flow is one conntrack flow of FakeTable: its protocol, its original
// direction (client to the address it sent to) and its reply direction
// (the endpoint that answers, back to the client or the address it was
// masqueraded to).
type Flow struct {
	Protocol                             policy.Protocol
	OrigSrc, OrigDst, ReplySrc, ReplyDst netip.AddrPort
}

// String renders the flow as conntrack -L shows its tuples, shortened:
// "UDP 10.0.0.1:40000>10.96.0.53:53 10.244.1.1:5353>10.0.0.1:40000".
func (f Flow) String() string {
	return fmt.Sprintf("%s %s>%s %s>%s", f.Protocol, f.OrigSrc, f.OrigDst, f.ReplySrc, f.ReplyDst)
}

// FakeTable is an in-memory conntrack table that behaves as the kernel's
// does for Table: a walk sees one family's flows (by their original
// destination's family) and gives stale the UDP ones only.
type FakeTable struct {
	mu    sync.Mutex
	flows []Flow
	// err, when set, fails the next walks before they delete anything,
	// as a table that cannot be dumped.
	err   error
	walks int
}

var _ Table = (*FakeTable)(nil)

// NewFakeTable returns a table holding flows.
func NewFakeTable(flows ...Flow) *FakeTable { return &FakeTable{flows: slices.Clone(flows)} }

// Add adds flows.
func (f *FakeTable) Add(flows ...Flow) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flows = append(f.flows, flows...)
}

// Fail makes the walks fail with err (nil: succeed again).
func (f *FakeTable) Fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// Walks counts the walks made, failed ones included.
func (f *FakeTable) Walks() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.walks
}

// DeleteUDP implements Table.
func (f *FakeTable) DeleteUDP(v6 bool, stale func(policy.UDPFlow) bool) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.walks++
	if f.err != nil {
		return 0, f.err
	}
	n := len(f.flows)
	f.flows = slices.DeleteFunc(f.flows, func(fl Flow) bool {
		return fl.OrigDst.Addr().Is6() == v6 && fl.Protocol == policy.ProtocolUDP &&
			stale(policy.UDPFlow{OrigDst: fl.OrigDst, ReplySrc: fl.ReplySrc})
	})
	return n - len(f.flows), nil
}

// Dump renders the table, one flow a line, sorted.
func (f *FakeTable) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	lines := make([]string, len(f.flows))
	for i, fl := range f.flows {
		lines[i] = fl.String() + "\n"
	}
	slices.Sort(lines)
	return strings.Join(lines, "")
}
