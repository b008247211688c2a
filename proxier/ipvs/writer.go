package ipvs

import (
	"errors"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/sysctl"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// Defaults of Config.
const (
	DefaultInterface      = "kube-ipvs0"
	DefaultGracefulPeriod = 15 * time.Minute
)

// Config configures a Writer.
type Config struct {
	// Interface is the dummy interface carrying VIPs; default kube-ipvs0.
	Interface string
	// GracefulPeriod is the longest a removed TCP destination drains;
	// default 15m.
	GracefulPeriod time.Duration
	// ExcludeCIDRs (--ipvs-exclude-cidrs): virtual servers on these
	// addresses are never deleted.
	ExcludeCIDRs []netip.Prefix
	// StrictARP (--ipvs-strict-arp) sets arp_ignore=1 and arp_announce=2.
	StrictARP bool
	// KernelRelease is the running kernel's release
	// (/proc/sys/kernel/osrelease, e.g. "5.4.0-150-generic"); NewLinux
	// reads it when empty. From 4.1 up to but not including 5.9,
	// net/ipv4/vs/conn_reuse_mode is set to 0, as kube-proxy.
	KernelRelease string
	// IPVS timeouts; 0 leaves the kernel's value.
	TCPTimeout, TCPFinTimeout, UDPTimeout time.Duration
	// Now is the clock, for tests; default time.Now.
	Now func() time.Time
	// RepairReader, when set, is a second handle on the same IPVS: a
	// Repair's services dump and Check's count of destinations run on
	// it in the background, so that Applies go on during them (on a
	// large node each takes seconds). NewLinux opens one. Nil:
	// StartRepair dumps, and Check counts, on the Writer's handle.
	RepairReader Kernel
}

// Writer programs IPVS and the dummy interface from plans. Its methods
// are safe for concurrent use (they serialize). Its state is grouped by
// owner: the kernel handles, where it is in its life (started, tuned,
// a Resync due), the mirror of the kernel, the desired state, and the
// two schedules; a sync's batch reconciles the desired state against
// the mirror (reconcile.go) and applies the kernel's answers to the
// mirror (execute.go).
type Writer struct {
	mu     sync.Mutex
	dumpMu sync.Mutex // serializes Config.RepairReader's dumps
	cfg    Config
	handles
	lifecycle
	mirrorState
	desiredState
	drift   driftSchedule  // when Check reads what (check.go)
	retries retrySchedule  // the failed services' backoff (desired.go)
	ops     map[string]int // kernel changes made, by kind (Ops)
	repair  *repairCursor  // a Repair in slices in progress
}

// handles are the kernel seams a Writer is given.
type handles struct {
	kernel  Kernel
	links   Links
	sysctls sysctl.Files // /proc/sys, for the keys of sysctlList
}

// lifecycle is where a Writer is in its life.
type lifecycle struct {
	started     bool // the kernel has been read
	tuned       bool // sysctls and timeouts applied
	tuneTried   bool
	needsResync bool // a failure asks for a Resync
}

// mirrorState is what the Writer believes the kernel holds: the virtual
// servers with their destinations, the dummy interface and its
// addresses, the destinations draining since they left the plan, and
// the virtual servers to adopt at the next kernel read. The kernel's
// answers (execute.go) and its reads (kernelstate.go, repair.go) change
// it.
type mirrorState struct {
	mirror     map[Key]*actual
	bound      map[netip.Addr]uint8 // addresses on the dummy interface, with their prefix lengths
	linkExists bool
	linkIndex  int // the dummy interface's index, when linkExists
	draining   map[Key]map[netip.AddrPort]time.Time
	recorded   map[Key]bool // to adopt at the next kernel read (AdoptRecorded)
}

// reset forgets the kernel's virtual servers, interface and addresses.
func (m *mirrorState) reset() {
	m.mirror = map[Key]*actual{}
	m.bound = map[netip.Addr]uint8{}
	m.linkExists, m.linkIndex = false, 0
}

// desiredState is what the plans ask for (desired.go): each planned
// virtual server in kernel form, which service claims it, how many
// planned virtual servers bind each address, the plans to translate
// again at a service's retry, and the deletions that failed after a
// service released a virtual server.
type desiredState struct {
	// desired is each planned virtual server in kernel form. claimed
	// lists the virtual servers each service claims. retryPlans holds
	// the planned virtual servers of the services that could not have
	// all of them (untranslatable, or claimed by another service), to
	// translate them again at their retry; other services are retried
	// from desired.
	desired    map[Key]*desiredVS
	claimed    map[policy.ServiceKey][]Key
	retryPlans map[policy.ServiceKey][]policy.VirtualServer
	addrRefs   map[netip.Addr]int        // planned VSs binding each address
	stale      map[Key]policy.ServiceKey // released by a service, deletion failed
}

// reset forgets every plan (not the stale deletions).
func (d *desiredState) reset() {
	d.retryPlans = map[policy.ServiceKey][]policy.VirtualServer{}
	d.claimed = map[policy.ServiceKey][]Key{}
	d.desired = map[Key]*desiredVS{}
	d.addrRefs = map[netip.Addr]int{}
}

// actual is the mirror of one kernel virtual server.
type actual struct {
	vs    VirtualServer
	dests destList
	// shared: dests is the desired virtual server's list (equal to it at
	// the end of a batch; Writer.share), or its start while a new virtual
	// server's destinations are being added, which put and remove copy
	// before they change it.
	shared bool
	// managed: created or adopted by this Writer, so deleting it when it
	// leaves the plan is ours to do even where ownership rules no longer
	// say so (its NodePort was removed, say).
	managed bool
}

// New returns a Writer over the given kernel handles (fakes in tests).
func New(cfg Config, k Kernel, l Links, sys sysctl.Files) *Writer {
	if cfg.Interface == "" {
		cfg.Interface = DefaultInterface
	}
	if cfg.GracefulPeriod <= 0 {
		cfg.GracefulPeriod = DefaultGracefulPeriod
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	w := &Writer{cfg: cfg, handles: handles{kernel: k, links: l, sysctls: sys}, ops: map[string]int{}}
	w.drift.now = cfg.Now
	w.desiredState.reset()
	w.mirrorState.reset()
	w.draining = map[Key]map[netip.AddrPort]time.Time{}
	w.retries = newRetrySchedule()
	w.stale = map[Key]policy.ServiceKey{}
	return w
}

// Apply applies changed services: each ServicePlan replaces that
// service's virtual servers, and an empty list removes them. It costs
// O(changed services), plus services due for a retry and draining
// destinations. The first call of a Writer (Apply or Resync) reads the
// kernel first and adopts what matches. A failure on one virtual server
// is returned, wrapped with it, and neither blocks nor undoes the others;
// its service is retried by later Applies with exponential backoff
// (1 s, doubling, at most 2 min; NextRetry says when), and the error is
// a *ServiceError (see SplitErrors). Only errors that leave the whole
// data plane unknown (the kernel unreadable, the dummy interface gone,
// the netlink socket dead) make NeedsResync true.
//
// Apply first checks cheaply that the dummy interface it knows still
// exists: if it was deleted or replaced, Apply changes nothing and
// returns an error wrapping ErrLinkChanged, and NeedsResync is true.
func (w *Writer) Apply(changes []policy.ServicePlan) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.linkChanged(); err != nil {
		w.needsResync = true
		return err
	}
	now := w.cfg.Now()
	b := w.newBatch(now)
	var errs []error
	if err := w.start(false); err != nil {
		errs = append(errs, err)
	}
	// Release before claim: the engine may move a virtual server from
	// one changed service to another in one batch (a ClusterIP deleted
	// and recreated, an external IP's owner gone).
	for _, ch := range changes {
		b.service(ch.Service, nil)
	}
	changed := map[policy.ServiceKey]bool{}
	for _, ch := range changes {
		changed[ch.Service] = true
		b.service(ch.Service, ch.VirtualServers)
	}
	for _, svc := range w.retries.due(now) {
		if !changed[svc] {
			b.retry(svc)
		}
	}
	if !w.started {
		// Without the kernel's state nothing can be diffed: keep the
		// plan and retry these services later.
		for svc := range b.services {
			b.blame(svc)
		}
		b.finish()
		return errors.Join(append(errs, b.errs...)...)
	}
	b.plan()
	w.touch(b.vsDone)
	b.drains()
	b.run()
	return errors.Join(append(errs, b.errs...)...)
}

// Resync makes the kernel match the whole plan: it re-reads the kernel's
// virtual servers, destinations and dummy addresses, adopts what matches,
// repairs drift (a virtual server deleted by hand, a changed weight),
// and removes stale virtual servers and addresses that are ours. With
// nothing changed it only reads: one services dump, one destinations
// dump per virtual server, the dummy interface and its addresses. A
// Repair in progress is abandoned.
func (w *Writer) Resync(plan policy.Plan) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.repair = nil
	var errs []error
	w.started, w.needsResync = false, false
	if err := w.start(true); err != nil {
		if !w.started {
			return err
		}
		errs = append(errs, err)
	}
	w.desiredState.reset()
	w.retries = newRetrySchedule()
	w.stale = map[Key]policy.ServiceKey{}
	b := w.newBatch(w.cfg.Now())
	b.allVS = true                          // every virtual server is reconciled below, in the order of their keys
	for svc, vss := range plan.Services() { // setDesired keeps no group
		b.service(svc, vss)
	}
	keys := slices.Collect(maps.Keys(w.mirror))
	for k := range w.desired {
		if w.mirror[k] == nil {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, Key.Compare)
	// Which virtual servers are ours is decided on the addresses bound
	// before this Resync: the binds run as soon as the adds stream.
	ours := make([]bool, len(keys))
	for i, k := range keys {
		ours[i] = w.owns(k)
	}
	b.planAddresses()
	w.planAddresses(b)
	b.streamAdds()
	for i, k := range keys {
		b.virtualServer(k, policy.ServiceKey{}, ours[i])
	}
	b.drains()
	b.run()
	return errors.Join(append(errs, b.errs...)...)
}

// AdoptRecorded tells the Writer that the virtual servers keys were
// programmed by an earlier run (the nftables table records its NodePort
// virtual servers, see nft.Writer.RecordedNodePorts). The next kernel
// read (the first sync, a Resync or Cleanup) adopts those that exist as
// ours: a Resync then deletes them unless the plan wants them, and
// Cleanup deletes them. Keys not in the kernel are ignored; excluded
// virtual servers are still never deleted. Calling it again replaces the
// keys not yet adopted.
func (w *Writer) AdoptRecorded(keys []Key) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.recorded = make(map[Key]bool, len(keys))
	for _, k := range keys {
		w.recorded[k] = true
	}
}

// forget drops all state but the op counts: the next call starts afresh.
func (w *Writer) forget() {
	w.started, w.tuned, w.tuneTried, w.needsResync = false, false, false, false
	w.desiredState.reset()
	w.mirrorState.reset()
	w.draining = map[Key]map[netip.AddrPort]time.Time{}
	w.retries = newRetrySchedule()
	w.stale = map[Key]policy.ServiceKey{}
	w.repair = nil
	w.drift.count.overtaken()
}

// Ops returns the number of kernel changes made so far by kind
// (add-service, update-service, delete-service, add-destination,
// update-destination, delete-destination, add-address, delete-address,
// add-link, delete-link, set-sysctl, set-timeouts), and
// under "error" how many of them failed. Reads are not counted.
func (w *Writer) Ops() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.ops)
}

// Draining returns the number of destinations draining (weight 0, kept
// until their connections end or the graceful period passes).
func (w *Writer) Draining() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, m := range w.draining {
		n += len(m)
	}
	return n
}

// NeedsResync reports whether the data plane's state is unknown since
// the last successful Resync (an error not confined to one service), so
// the caller should Resync soon.
func (w *Writer) NeedsResync() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.needsResync
}

// Failing returns the services whose last attempt failed and that are
// retried with backoff, sorted.
func (w *Writer) Failing() []policy.ServiceKey {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.retries.services()
}

// NextRetry returns when the earliest failed service is due for a retry
// by Apply; zero when none failed.
func (w *Writer) NextRetry() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.retries.next()
}

// call runs one kernel change, counting it.
func (w *Writer) call(kind string, fn func() error) error {
	w.ops[kind]++
	if err := fn(); err != nil {
		w.ops["error"]++
		return err
	}
	return nil
}

// excluded reports whether a is in Config.ExcludeCIDRs.
func (w *Writer) excluded(a netip.Addr) bool {
	for _, p := range w.cfg.ExcludeCIDRs {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// owns reports whether a kernel virtual server is ours to manage: on an
// address of the dummy interface, planned by its exact key (address,
// protocol and port: a NodePort of the plan on another node address or
// family says nothing of it), or created or adopted by this Writer
// (adopted from the plan, or from the record of AdoptRecorded).
func (w *Writer) owns(k Key) bool {
	if _, ok := w.bound[k.Address]; ok {
		return true
	}
	if x := w.desired[k]; x != nil {
		return true // planned by this exact key
	}
	a := w.mirror[k]
	return a != nil && a.managed
}

// Close releases the kernel handles (NewLinux's IPVS netlink sockets
// and /proc table), Config.RepairReader's among them: an open handle
// keeps its network namespace, with the IPVS state in it, alive. The
// kernel state is left as it is.
func (w *Writer) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	hs := []any{w.kernel, w.links, w.sysctls}
	if r := w.cfg.RepairReader; r != nil && !sameHandle(r, w.kernel) {
		hs = append(hs, r)
	}
	for _, h := range hs {
		if c, ok := h.(interface{ Close() }); ok {
			c.Close()
		}
	}
}

// sameHandle reports whether a and b are one handle, so that it is
// closed once.
func sameHandle(a, b any) bool {
	return reflect.TypeOf(a) == reflect.TypeOf(b) && reflect.TypeOf(a).Comparable() && a == b
}

// gone treats a deletion that found nothing to delete (errnos) as done:
// the kernel is already as desired.
func gone(err error, errnos ...syscall.Errno) error {
	for _, e := range errnos {
		if errors.Is(err, e) {
			return nil
		}
	}
	return err
}
