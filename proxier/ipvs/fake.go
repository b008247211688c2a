package ipvs

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// FaultFunc, set on a fake, is called before each of its operations with
// the operation (the Writer's op kinds, e.g. "add-service", and
// "list-services", "get-service", "list-destinations", "list-addresses") and its target
// ("10.96.0.1:80/TCP", "10.96.0.1:80/TCP 10.244.1.5:8080",
// "kube-ipvs0 10.96.0.1/32", a sysctl key). A non-nil error is returned
// in place of doing the operation.
type FaultFunc func(op, target string) error

// schedulers are the IPVS schedulers of Linux 6.1 ("twos" came in 6.2),
// and "none", the kernel's name for no scheduler, which it accepts.
var schedulers = []string{"dh", "fo", "lblc", "lblcr", "lc", "mh", "none", "nq", "ovf", "rr", "sed", "sh", "wlc", "wrr"}

// FakeKernel is an in-memory IPVS that answers as the kernel does:
// EEXIST for a duplicate, ESRCH for a missing virtual server, ENOENT for
// a missing destination or an unknown scheduler, ERANGE for a negative
// weight, and an empty destination list for a missing virtual server.
type FakeKernel struct {
	mu         sync.Mutex
	vss        map[Key]*fakeVS
	timeouts   Timeouts
	schedulers []string
	writes     int
	dests      []Destination // Destinations' answer, refilled by each call
	Fault      FaultFunc
}

type fakeVS struct {
	vs    VirtualServer
	dests map[netip.AddrPort]*Destination
}

// NewFakeKernel returns an empty IPVS with Linux's default timeouts and
// Linux 6.1's schedulers.
func NewFakeKernel() *FakeKernel {
	return &FakeKernel{vss: map[Key]*fakeVS{}, timeouts: Timeouts{TCP: 900e9, TCPFin: 120e9, UDP: 300e9}, schedulers: schedulers}
}

// NewFakeKernelFor is NewFakeKernel with the schedulers of the kernel
// release (as /proc/sys/kernel/osrelease has it): "twos" from 6.2.
func NewFakeKernelFor(release string) *FakeKernel {
	f := NewFakeKernel()
	if v, ok := kernelVersion(release); ok && !versionLess(v, [2]int{6, 2}) {
		f.schedulers = append(slices.Clone(schedulers), "twos")
	}
	return f
}

var _ Kernel = (*FakeKernel)(nil)

func (f *FakeKernel) fault(op, target string) error {
	if f.Fault == nil {
		return nil
	}
	return f.Fault(op, target)
}

func destTarget(k Key, d Destination) string { return k.String() + " " + d.AddrPort().String() }

// VirtualServers implements Kernel.
func (f *FakeKernel) VirtualServers() ([]VirtualServer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fault("list-services", ""); err != nil {
		return nil, err
	}
	var out []VirtualServer
	for _, k := range slices.SortedFunc(maps.Keys(f.vss), Key.Compare) {
		out = append(out, f.vss[k].vs)
	}
	return out, nil
}

// VirtualServer implements Kernel.
func (f *FakeKernel) VirtualServer(k Key) (VirtualServer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fault("get-service", k.String()); err != nil {
		return VirtualServer{}, err
	}
	v := f.vss[k]
	if v == nil {
		return VirtualServer{}, syscall.ESRCH
	}
	return v.vs, nil
}

// DestinationCounts implements Kernel.
func (f *FakeKernel) DestinationCounts() (map[Key]int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fault("count-destinations", ""); err != nil {
		return nil, err
	}
	out := make(map[Key]int, len(f.vss))
	for k, v := range f.vss {
		out[k] = len(v.dests)
	}
	return out, nil
}

// Destinations implements Kernel.
func (f *FakeKernel) Destinations(k Key) ([]Destination, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fault("list-destinations", k.String()); err != nil {
		return nil, err
	}
	v := f.vss[k]
	if v == nil {
		return nil, nil
	}
	// The list is refilled by the next call, as the kernel's adapter
	// refills its own: a caller that keeps one sees it change under it.
	out := f.dests[:0]
	for _, d := range slices.SortedFunc(maps.Keys(v.dests), netip.AddrPort.Compare) {
		out = append(out, *v.dests[d])
	}
	f.dests = out
	return out, nil
}

// AddVirtualServer implements Kernel.
func (f *FakeKernel) AddVirtualServer(vs VirtualServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fault("add-service", vs.Key.String()); err != nil {
		return err
	}
	if f.vss[vs.Key] != nil {
		return syscall.EEXIST
	}
	if !slices.Contains(f.schedulers, vs.Scheduler) {
		return syscall.ENOENT
	}
	vs.Flags &^= FlagHashed
	f.vss[vs.Key] = &fakeVS{vs: vs, dests: map[netip.AddrPort]*Destination{}}
	return nil
}

// UpdateVirtualServer implements Kernel.
func (f *FakeKernel) UpdateVirtualServer(vs VirtualServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fault("update-service", vs.Key.String()); err != nil {
		return err
	}
	v := f.vss[vs.Key]
	switch {
	case v == nil:
		return syscall.ESRCH
	case !slices.Contains(f.schedulers, vs.Scheduler):
		return syscall.ENOENT
	}
	vs.Flags &^= FlagHashed
	v.vs = vs
	return nil
}

// DeleteVirtualServer implements Kernel.
func (f *FakeKernel) DeleteVirtualServer(k Key) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fault("delete-service", k.String()); err != nil {
		return err
	}
	if f.vss[k] == nil {
		return syscall.ESRCH
	}
	delete(f.vss, k)
	return nil
}

// AddDestination implements Kernel.
func (f *FakeKernel) AddDestination(k Key, d Destination) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fault("add-destination", destTarget(k, d)); err != nil {
		return err
	}
	v := f.vss[k]
	switch {
	case v == nil:
		return syscall.ESRCH
	case d.Weight < 0:
		return syscall.ERANGE
	case v.dests[d.AddrPort()] != nil:
		return syscall.EEXIST
	}
	d.ActiveConns, d.InactiveConns = 0, 0
	v.dests[d.AddrPort()] = &d
	return nil
}

// UpdateDestination implements Kernel.
func (f *FakeKernel) UpdateDestination(k Key, d Destination) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fault("update-destination", destTarget(k, d)); err != nil {
		return err
	}
	v := f.vss[k]
	if v == nil {
		return syscall.ESRCH
	}
	cur := v.dests[d.AddrPort()]
	switch {
	case d.Weight < 0:
		return syscall.ERANGE
	case cur == nil:
		return syscall.ENOENT
	}
	cur.Weight, cur.Forward = d.Weight, d.Forward
	return nil
}

// DeleteDestination implements Kernel.
func (f *FakeKernel) DeleteDestination(k Key, d Destination) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fault("delete-destination", destTarget(k, d)); err != nil {
		return err
	}
	v := f.vss[k]
	switch {
	case v == nil:
		return syscall.ESRCH
	case v.dests[d.AddrPort()] == nil:
		return syscall.ENOENT
	}
	delete(v.dests, d.AddrPort())
	return nil
}

// Write implements Kernel: one op after the other, as the kernel
// processes a batch, each failing as its single-change method would
// (Fault included).
func (f *FakeKernel) Write(ops []Op) []error {
	if len(ops) == 0 {
		return nil
	}
	f.mu.Lock()
	f.writes++
	f.mu.Unlock()
	errs := make([]error, len(ops))
	for i, o := range ops {
		errs[i] = f.change(o)
	}
	return errs
}

// change makes one op through its single-change method.
func (f *FakeKernel) change(o Op) error {
	switch o.Kind {
	case OpAddService:
		return f.AddVirtualServer(o.VS)
	case OpUpdateService:
		return f.UpdateVirtualServer(o.VS)
	case OpDeleteService:
		return f.DeleteVirtualServer(o.VS.Key)
	case OpAddDestination:
		return f.AddDestination(o.VS.Key, o.Dest)
	case OpUpdateDestination:
		return f.UpdateDestination(o.VS.Key, o.Dest)
	case OpDeleteDestination:
		return f.DeleteDestination(o.VS.Key, o.Dest)
	}
	return fmt.Errorf("%s: unknown op kind", o)
}

// Writes returns how many calls of Write had ops to make: how many
// batches the Writer handed the kernel.
func (f *FakeKernel) Writes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writes
}

// Timeouts implements Kernel.
func (f *FakeKernel) Timeouts() (Timeouts, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.timeouts, f.fault("get-timeouts", "")
}

// SetTimeouts implements Kernel.
func (f *FakeKernel) SetTimeouts(t Timeouts) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fault("set-timeouts", ""); err != nil {
		return err
	}
	// The kernel takes whole seconds: 1.5s is 1s, and 500ms is 0,
	// which leaves that timeout unchanged.
	t.TCP, t.TCPFin, t.UDP = t.TCP.Truncate(time.Second), t.TCPFin.Truncate(time.Second), t.UDP.Truncate(time.Second)
	if t.TCP != 0 {
		f.timeouts.TCP = t.TCP
	}
	if t.TCPFin != 0 {
		f.timeouts.TCPFin = t.TCPFin
	}
	if t.UDP != 0 {
		f.timeouts.UDP = t.UDP
	}
	return nil
}

// SetConns sets a destination's connection counts, as traffic would.
func (f *FakeKernel) SetConns(k Key, d netip.AddrPort, active, inactive uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := f.vss[k]
	if v == nil {
		return syscall.ESRCH
	}
	cur := v.dests[d]
	if cur == nil {
		return syscall.ENOENT
	}
	cur.ActiveConns, cur.InactiveConns = active, inactive
	return nil
}

// Dump renders the IPVS state, sorted, one line per virtual server and
// destination, like ipvsadm -Ln.
func (f *FakeKernel) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for _, k := range slices.SortedFunc(maps.Keys(f.vss), Key.Compare) {
		v := f.vss[k]
		fmt.Fprintf(&b, "%s %s %s flags=%#x timeout=%d\n", k.Protocol, netip.AddrPortFrom(k.Address, k.Port), v.vs.Scheduler, v.vs.Flags, v.vs.Timeout)
		for _, ap := range slices.SortedFunc(maps.Keys(v.dests), netip.AddrPort.Compare) {
			d := v.dests[ap]
			fwd := "masq"
			if d.Forward != ForwardMasq {
				fwd = fmt.Sprintf("fwd=%d", d.Forward)
			}
			fmt.Fprintf(&b, "  -> %s %s weight=%d active=%d inactive=%d\n", ap, fwd, d.Weight, d.ActiveConns, d.InactiveConns)
		}
	}
	if f.timeouts != (Timeouts{TCP: 900e9, TCPFin: 120e9, UDP: 300e9}) {
		fmt.Fprintf(&b, "timeouts tcp=%s tcpfin=%s udp=%s\n", f.timeouts.TCP, f.timeouts.TCPFin, f.timeouts.UDP)
	}
	return b.String()
}
