package ipvs

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/sysctl"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// start reads the kernel on a Writer's first sync and makes sure the
// dummy interface exists and the sysctls and timeouts are set. A missing
// dummy interface is retried by the next call; sysctls and timeouts that
// failed by the next Resync (full), so that a read-only /proc/sys does
// not fail every Apply.
func (w *Writer) start(full bool) error {
	if !w.started {
		if err := w.readKernel(); err != nil {
			w.needsResync = true
			return err
		}
		w.started = true
	}
	var errs []error
	if !w.linkExists {
		if err := w.addLink(); err != nil {
			w.needsResync = true
			errs = append(errs, err)
		}
	}
	if !w.tuned && (!w.tuneTried || full) {
		w.tuneTried = true
		if err := w.tune(); err != nil {
			errs = append(errs, err)
		} else {
			w.tuned = true
		}
	}
	return errors.Join(errs...)
}

// addLink creates the dummy interface and records its index.
func (w *Writer) addLink() error {
	name := w.cfg.Interface
	err := w.call("add-link", func() error { return w.links.AddDummy(name) })
	if err != nil && !errors.Is(err, syscall.EEXIST) {
		return fmt.Errorf("add link %s: %w", name, err)
	}
	info, err := w.links.Link(name)
	if err != nil {
		return fmt.Errorf("read link %s: %w", name, err)
	}
	if err := checkLink(name, info); err != nil {
		return err
	}
	w.linkExists, w.linkIndex = true, info.Index
	return nil
}

// dummyKind is the rtnetlink kind of a dummy interface.
const dummyKind = "dummy"

// linkChanged checks cheaply (one rtnetlink request) that the dummy
// interface the mirror knows still exists with the same index.
func (w *Writer) linkChanged() error {
	if !w.started || !w.linkExists {
		return nil
	}
	info, err := w.links.Link(w.cfg.Interface)
	switch {
	case errors.Is(err, syscall.ENODEV):
		return fmt.Errorf("link %s: %w", w.cfg.Interface, ErrLinkChanged)
	case err != nil:
		return fmt.Errorf("read link %s: %w", w.cfg.Interface, err)
	case info.Index != w.linkIndex || info.Kind != dummyKind:
		return fmt.Errorf("link %s (index %d, was %d): %w", w.cfg.Interface, info.Index, w.linkIndex, ErrLinkChanged)
	}
	return nil
}

// readKernel replaces the mirror with the kernel's virtual servers,
// destinations and dummy addresses. Managed marks and drain start times
// survive for what still exists; virtual servers named by AdoptRecorded
// become managed, and the record is then consumed.
func (w *Writer) readKernel() error {
	vss, err := w.kernel.VirtualServers()
	if err != nil {
		return fmt.Errorf("list virtual servers: %w", err)
	}
	mirror := make(map[Key]*actual, len(vss))
	for _, vs := range vss {
		ds, err := w.kernel.Destinations(vs.Key)
		if err != nil {
			return fmt.Errorf("list destinations of virtual server %s: %w", vs.Key, err)
		}
		a := &actual{vs: vs, dests: newDestList(ds)}
		if old := w.mirror[vs.Key]; old != nil {
			a.managed = old.managed
		}
		if w.recorded[vs.Key] {
			a.managed = true
		}
		mirror[vs.Key] = a
	}
	exists, index, prefixes, err := w.readAddresses()
	if err != nil {
		return err
	}
	w.mirror = mirror
	w.drift.count.overtaken()
	w.recorded = nil
	w.setBound(exists, index, prefixes)
	for k, m := range w.draining {
		a := mirror[k]
		for d := range m {
			if _, ok := a.destination(d); !ok {
				delete(m, d)
			}
		}
		if len(m) == 0 {
			delete(w.draining, k)
		}
	}
	return nil
}

// readAddresses reads the dummy interface and its addresses. The link
// comes first: never read (and so never strip) the addresses of a link
// that is not ours (checkLink).
func (w *Writer) readAddresses() (exists bool, index int, prefixes []netip.Prefix, err error) {
	info, err := w.links.Link(w.cfg.Interface)
	switch {
	case errors.Is(err, syscall.ENODEV):
		return false, 0, nil, nil
	case err != nil:
		return false, 0, nil, fmt.Errorf("read link %s: %w", w.cfg.Interface, err)
	}
	if err := checkLink(w.cfg.Interface, info); err != nil {
		return false, 0, nil, err
	}
	prefixes, err = w.links.Addrs(w.cfg.Interface)
	switch {
	case errors.Is(err, syscall.ENODEV):
		return false, 0, nil, nil
	case err != nil:
		return false, 0, nil, fmt.Errorf("list addresses of %s: %w", w.cfg.Interface, err)
	}
	return true, info.Index, prefixes, nil
}

// setBound records the dummy interface and its addresses as read.
func (w *Writer) setBound(exists bool, index int, prefixes []netip.Prefix) {
	w.linkExists, w.linkIndex = exists, index
	w.bound = make(map[netip.Addr]uint8, len(prefixes))
	for _, p := range prefixes {
		w.bound[p.Addr().Unmap()] = uint8(p.Bits())
	}
}

func (a *actual) destination(d netip.AddrPort) (Destination, bool) {
	if a == nil {
		return Destination{}, false
	}
	return a.dests.get(d)
}

// sysctlSetting is a sysctl key and the value the Writer gives it.
type sysctlSetting struct{ key, value string }

// sysctlList is what kube-proxy's IPVS mode sets.
func (w *Writer) sysctlList() []sysctlSetting {
	l := []sysctlSetting{
		{"net/ipv4/vs/conntrack", "1"},
		{"net/ipv4/vs/expire_nodest_conn", "1"},
		{"net/ipv4/vs/expire_quiescent_template", "1"},
		{"net/ipv4/ip_forward", "1"},
	}
	if w.cfg.StrictARP {
		l = append(l, sysctlSetting{"net/ipv4/conf/all/arp_ignore", "1"}, sysctlSetting{"net/ipv4/conf/all/arp_announce", "2"})
	}
	if connReuseModeOff(w.cfg.KernelRelease) {
		l = append(l, sysctlSetting{ConnReuseModeKey, "0"})
	}
	return l
}

// ConnReuseModeKey is the IPVS sysctl kube-proxy sets to 0 on kernels
// from 4.1 (where it appeared) up to 5.9: there, with its default 1, a
// new connection that reuses a source port of a finished one was
// rescheduled only after a one-second stall, and with 0 it stays on the
// old, perhaps removed, destination. 5.9 fixed the stall, and kube-proxy
// leaves it alone from there.
const ConnReuseModeKey = "net/ipv4/vs/conn_reuse_mode"

// connReuseModeOff reports whether release (a kernel release, "5.4.0-…")
// is one where kube-proxy sets conn_reuse_mode to 0: at least 4.1, below
// 5.9. An unparsable release is left alone.
func connReuseModeOff(release string) bool {
	v, ok := kernelVersion(release)
	return ok && !versionLess(v, [2]int{4, 1}) && versionLess(v, [2]int{5, 9})
}

// kernelVersion is release's major and minor numbers.
func kernelVersion(release string) ([2]int, bool) {
	var v [2]int
	rest := strings.TrimSpace(release)
	for i := range v {
		n := 0
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		if n == 0 {
			return v, false
		}
		x, err := strconv.Atoi(rest[:n])
		if err != nil {
			return v, false
		}
		v[i], rest = x, rest[n:]
		if i == 0 {
			if !strings.HasPrefix(rest, ".") {
				return v, false
			}
			rest = rest[1:]
		}
	}
	return v, true
}

// versionLess orders kernel versions.
func versionLess(a, b [2]int) bool { return a[0] < b[0] || a[0] == b[0] && a[1] < b[1] }

// Tune sets the sysctls and IPVS timeouts kube-proxy's IPVS mode sets,
// writing only what differs: what --init-only does; the first sync does
// it too.
func (w *Writer) Tune() error { return w.tune() }

// tune sets the sysctls and IPVS timeouts, writing only what differs.
func (w *Writer) tune() error {
	var errs []error
	for _, s := range w.sysctlList() {
		cur, err := w.sysctls.Read(sysctl.Path(s.key))
		if err != nil {
			errs = append(errs, fmt.Errorf("read sysctl %s: %w", s.key, err))
			continue
		}
		if strings.TrimSpace(cur) == s.value {
			continue
		}
		if err := w.call("set-sysctl", func() error { return w.sysctls.Write(sysctl.Path(s.key), s.value) }); err != nil {
			errs = append(errs, fmt.Errorf("set sysctl %s=%s: %w", s.key, s.value, err))
		}
	}
	if err := w.setTimeouts(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (w *Writer) setTimeouts() error {
	// The kernel keeps whole seconds (a value under 1 s is 0: unchanged),
	// so compare what it would hold, not to set 1.5 s over 1 s each sync.
	cfg := Timeouts{TCP: w.cfg.TCPTimeout.Truncate(time.Second), TCPFin: w.cfg.TCPFinTimeout.Truncate(time.Second),
		UDP: w.cfg.UDPTimeout.Truncate(time.Second)}
	if cfg == (Timeouts{}) {
		return nil
	}
	cur, err := w.kernel.Timeouts()
	if err != nil {
		return fmt.Errorf("read ipvs timeouts: %w", err)
	}
	var set Timeouts
	if cfg.TCP != 0 && cfg.TCP != cur.TCP {
		set.TCP = cfg.TCP
	}
	if cfg.TCPFin != 0 && cfg.TCPFin != cur.TCPFin {
		set.TCPFin = cfg.TCPFin
	}
	if cfg.UDP != 0 && cfg.UDP != cur.UDP {
		set.UDP = cfg.UDP
	}
	if set == (Timeouts{}) {
		return nil
	}
	if err := w.call("set-timeouts", func() error { return w.kernel.SetTimeouts(set) }); err != nil {
		return fmt.Errorf("set ipvs timeouts: %w", err)
	}
	return nil
}

// schedulerProbe is the virtual server kube-proxy's CanUseIPVSProxier
// adds to learn whether the kernel has a scheduler: an address of
// TEST-NET-2 (RFC 5737), reserved for documentation, which no node or
// Service should use.
var schedulerProbe = Key{Address: netip.MustParseAddr("198.51.100.0"), Protocol: policy.ProtocolTCP, Port: 20000}

// CheckScheduler reports whether the kernel has IPVS scheduler name
// ("" is rr), as kube-proxy checks it at start: a virtual server that
// already uses it is enough (a restart); otherwise a probe virtual
// server is added with it, which makes the kernel load its module
// (ip_vs_<name>) if it can, and deleted. "none", the kernel's name for
// no scheduler, needs no module. The error names the module.
func (w *Writer) CheckScheduler(name string) error { return checkScheduler(w.kernel, name) }

func checkScheduler(k Kernel, name string) error {
	if name == "" {
		name = policy.DefaultScheduler
	}
	vss, err := k.VirtualServers()
	if err != nil {
		return fmt.Errorf("check IPVS scheduler %q: list the virtual servers: %w", name, err)
	}
	for _, vs := range vss {
		if vs.Scheduler == name {
			return nil
		}
	}
	probe := VirtualServer{Key: schedulerProbe, Scheduler: name}
	err = writeOne(k, Op{Kind: OpAddService, VS: probe})
	if errors.Is(err, syscall.EEXIST) { // left by a start that stopped between the two
		if err = writeOne(k, Op{Kind: OpDeleteService, VS: VirtualServer{Key: schedulerProbe}}); err == nil {
			err = writeOne(k, Op{Kind: OpAddService, VS: probe})
		}
	}
	if err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("IPVS scheduler %q: the kernel has no such scheduler (module ip_vs_%s): %w", name, name, err)
		}
		return fmt.Errorf("check IPVS scheduler %q: add probe virtual server %s: %w", name, schedulerProbe, err)
	}
	if err := writeOne(k, Op{Kind: OpDeleteService, VS: VirtualServer{Key: schedulerProbe}}); err != nil {
		return fmt.Errorf("check IPVS scheduler %q: delete probe virtual server %s: %w", name, schedulerProbe, err)
	}
	return nil
}
