package proxier

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"k8s.io/utils/clock"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/udpflows"
)

// DataPlaneConfig configures both kernel writers.
type DataPlaneConfig struct {
	// Interface is the dummy interface carrying VIPs (--ipvs-interface);
	// default kube-ipvs0.
	Interface string
	// ClusterCIDRs are the pod networks (--cluster-cidr).
	ClusterCIDRs []netip.Prefix
	// PodInterface and PodInterfacePrefix tell this node's pods by
	// interface instead (nft.Config).
	PodInterface       string
	PodInterfacePrefix bool
	// MasqueradeBit is the packet mark bit for masquerade; default 14.
	MasqueradeBit int
	// GracefulPeriod bounds the drain of removed destinations
	// (--ipvs-graceful-period); default 15m.
	GracefulPeriod time.Duration
	// ExcludeCIDRs (--ipvs-exclude-cidrs): virtual servers there are never
	// deleted.
	ExcludeCIDRs []netip.Prefix
	// StrictARP (--ipvs-strict-arp).
	StrictARP bool
	// IPVS timeouts (--ipvs-tcp-timeout, --ipvs-tcpfin-timeout,
	// --ipvs-udp-timeout); 0 leaves the kernel's value.
	TCPTimeout, TCPFinTimeout, UDPTimeout time.Duration
	// Scheduler is the default IPVS scheduler (--ipvs-scheduler; "" is
	// rr), which the kernel must have: checked when the data plane opens.
	Scheduler string
}

func (c DataPlaneConfig) ipvsConfig() ipvs.Config {
	return ipvs.Config{
		Interface: c.Interface, GracefulPeriod: c.GracefulPeriod, ExcludeCIDRs: c.ExcludeCIDRs,
		StrictARP: c.StrictARP, TCPTimeout: c.TCPTimeout, TCPFinTimeout: c.TCPFinTimeout, UDPTimeout: c.UDPTimeout,
	}
}

func (c DataPlaneConfig) nftConfig() nft.Config {
	return nft.Config{ClusterCIDRs: c.ClusterCIDRs, PodInterface: c.PodInterface, PodInterfacePrefix: c.PodInterfacePrefix, MasqueradeBit: c.MasqueradeBit}
}

// kernelWriter is the one contract of both kernel writers, nft.Writer
// and ipvs.Writer, which the DataPlane holds alike: Apply, Resync and
// NeedsResync as DataPlaneWriter's, the sliced repair, a cheap check that
// the writer's kernel object still exists, and Cleanup. Each writer adds
// only what is its alone: the nftables table's record of the NodePort
// virtual servers, which the IPVS writer adopts; the IPVS writer's
// per-service retries and drains.
type kernelWriter interface {
	Apply(changes []policy.ServicePlan) error
	Resync(plan policy.Plan) error
	NeedsResync() bool
	StartRepair() error
	RepairStep(budget time.Duration, stop func() bool) (done bool, err error)
	// Check verifies cheaply that the writer's kernel object (the table,
	// the dummy interface) still exists.
	Check() error
	// Cleanup removes what the writer owns, and nothing foreign.
	Cleanup() error
}

// nftWriter is the nftables writer as the DataPlane holds it.
type nftWriter interface {
	kernelWriter
	// RecordedNodePorts reads the table's record of the NodePort virtual
	// servers we programmed; none, no error, without a table.
	RecordedNodePorts() ([]policy.VirtualServerKey, error)
	// TableExists reads whether our table is in the kernel.
	TableExists() (bool, error)
}

// ipvsWriter is the IPVS writer as the DataPlane holds it: it adopts the
// recorded NodePort virtual servers, retries failed services with
// backoff and drains removed destinations.
type ipvsWriter interface {
	kernelWriter
	AdoptRecorded(keys []policy.VirtualServerKey)
	// Clean is Cleanup returning what it removed; with dryRun it
	// removes nothing and returns what Cleanup would remove.
	Clean(dryRun bool) (ipvs.Removed, error)
	Failing() []policy.ServiceKey
	NextRetry() time.Time
	Ops() map[string]int
	Draining() int
	Close()
}

var (
	_ nftWriter  = (*nft.Writer)(nil)
	_ ipvsWriter = (*ipvs.Writer)(nil)
)

// errResyncDue is StartRepair's answer when only a Resync will do.
var errResyncDue = errors.New("a full resync is due")

// Phases of a DataPlane Repair: the nftables table first (as Apply), then
// IPVS.
type repairPhase int

const (
	repairIdle repairPhase = iota
	repairNFT
	repairIPVSStart
	repairIPVS
)

// DataPlane programs plans into IPVS and nftables.
type DataPlane struct {
	nft  nftWriter
	ipvs ipvsWriter
	// adopted: the first Resync has read the record of NodePort virtual
	// servers left by an earlier run.
	adopted bool
	// failures are the services the last Apply or Resync could not
	// program, or those of the Repair in progress and its Applies.
	failures []ServiceFailure
	repair   repairPhase
	// ct deletes stale UDP conntrack flows; nil deletes none (tests).
	ct *udpflows.Reconciler
	// lastResync is how long each writer took in the last Resync, read
	// on now (time.Now when nil).
	lastResync ResyncTimes
	now        func() time.Time
}

// ResyncTimes is how long each writer took in a data plane's Resync:
// the first sync's summary line says where a cold start's sync went
// (the rest of it is mostly computing the plan).
type ResyncTimes struct {
	NFTables, IPVS time.Duration
}

// LastResync reports how long each writer took in the last Resync.
func (d *DataPlane) LastResync() ResyncTimes { return d.lastResync }

func (d *DataPlane) clockNow() time.Time {
	if d.now == nil {
		return time.Now()
	}
	return d.now()
}

// NewDataPlane opens both writers on the running kernel.
func NewDataPlane(cfg DataPlaneConfig) (*DataPlane, error) {
	n, err := nft.NewLinux(cfg.nftConfig())
	if err != nil {
		return nil, fmt.Errorf("open nftables: %w", err)
	}
	i, err := ipvs.NewLinux(cfg.ipvsConfig())
	if err != nil {
		return nil, fmt.Errorf("open ipvs: %w", err)
	}
	if err := i.CheckScheduler(cfg.Scheduler); err != nil {
		i.Close()
		return nil, fmt.Errorf("can't use the IPVS proxier: %w", err)
	}
	return &DataPlane{nft: n, ipvs: i, ct: udpflows.New(udpflows.Netlink{}, clock.RealClock{})}, nil
}

// InitKernel does what kube-proxy's --init-only does in IPVS mode, and
// nothing else: it checks that the kernel has IPVS and the scheduler, and
// sets the IPVS sysctls and timeouts (ipvs.Writer.Tune). No virtual
// server, address or nftables table is made.
func InitKernel(cfg DataPlaneConfig) error {
	i, err := ipvs.NewLinux(cfg.ipvsConfig())
	if err != nil {
		return fmt.Errorf("open ipvs: %w", err)
	}
	defer i.Close()
	if err := i.CheckScheduler(cfg.Scheduler); err != nil {
		return fmt.Errorf("can't use the IPVS proxier: %w", err)
	}
	if err := i.Tune(); err != nil {
		return fmt.Errorf("set the IPVS sysctls and timeouts: %w", err)
	}
	return nil
}

// WatchForeignEdits makes Check see at once, until ctx ends, an edit of
// our nftables table by another process (a set flushed, an element or
// rule deleted), where otherwise only a deleted table is seen before the
// periodic repair. The IPVS side has no such notifications. It fails if
// the notification socket cannot be opened; Check then works as before.
func (d *DataPlane) WatchForeignEdits(ctx context.Context) error {
	w, ok := d.nft.(*nft.Writer)
	if !ok {
		return nil
	}
	self, err := nft.SelfName()
	if err != nil {
		return err
	}
	f := nft.NewForeignEdits(nft.TableName, self)
	if err := nft.WatchForeignEdits(ctx, f); err != nil {
		return err
	}
	w.WatchEdits(f)
	return nil
}

// newDataPlane composes given writers, for tests with fakes.
func newDataPlane(n nftWriter, i ipvsWriter) *DataPlane { return &DataPlane{nft: n, ipvs: i} }

// Apply programs per-service changes incrementally. nftables goes first,
// so a new virtual server's filtering and masquerade exist before IPVS
// accepts its traffic. Both writers are always tried; a failure in one
// does not stop the other. A failure confined to one service (an IPVS
// virtual server the kernel refused) is not returned: ServiceFailures
// lists it, and the IPVS writer retries the service with backoff
// (NextRetry). Any other failure is returned and NeedsResync reports
// true. Each writer first checks cheaply that its kernel object (the
// table, the dummy interface) still exists; if not, Apply returns an
// error and NeedsResync is true.
func (d *DataPlane) Apply(changes []policy.ServicePlan) error {
	nftErr := d.nft.Apply(changes)
	svcErrs, ipvsErr := ipvs.SplitErrors(d.ipvs.Apply(changes))
	if d.repair == repairIdle {
		d.failures = d.failures[:0]
	}
	d.addFailures(svcErrs)
	return errors.Join(wrap("nftables", nftErr), wrap("ipvs", ipvsErr))
}

// setFailures records the per-service failures of the last call.
func (d *DataPlane) setFailures(errs []*ipvs.ServiceError) {
	d.failures = d.failures[:0]
	d.addFailures(errs)
}

func (d *DataPlane) addFailures(errs []*ipvs.ServiceError) {
	for _, e := range errs {
		d.failures = append(d.failures, ServiceFailure{Service: e.Service, Reason: e.Reason, Err: fmt.Errorf("ipvs: %w", e.Err)})
	}
}

// ServiceFailures returns the services the last Apply or Resync could
// not program; the rest of that call succeeded.
func (d *DataPlane) ServiceFailures() []ServiceFailure { return slices.Clone(d.failures) }

// Failing returns the services whose last attempt failed, retried with
// backoff, sorted.
func (d *DataPlane) Failing() []policy.ServiceKey { return d.ipvs.Failing() }

// NextRetry returns when a failed service is due for a retry by Apply;
// zero when none failed.
func (d *DataPlane) NextRetry() time.Time { return d.ipvs.NextRetry() }

// Check verifies cheaply that our kernel objects, the nftables table and
// the dummy interface, still exist (one netlink request each). If one was
// deleted (or the interface replaced) behind our back, it returns an
// error and NeedsResync reports true. It changes nothing, and checks
// nothing a Resync already due will rewrite anyway.
func (d *DataPlane) Check() error {
	return errors.Join(wrap("nftables", d.nft.Check()), wrap("ipvs", d.ipvs.Check()))
}

// Resync programs the whole plan: the nftables table is read back and
// its drift repaired in one transaction (or, when it is missing, not the
// one we write, or a call failed before, replaced in one transaction),
// and IPVS is re-read from the kernel and repaired. A Repair in progress
// is abandoned.
//
// The first Resync first reads the table an earlier run left (before it
// is replaced): the NodePort virtual servers it records are adopted by
// the IPVS writer, so those the plan no longer has are deleted rather
// than left behind as foreign. A failed read is reported and the Resync
// goes on without the record, as before there was one.
func (d *DataPlane) Resync(plan policy.Plan) error {
	var errs []error
	if !d.adopted {
		d.adopted = true
		recorded, err := d.nft.RecordedNodePorts()
		if err != nil {
			errs = append(errs, fmt.Errorf("nftables: adopt recorded NodePort virtual servers: %w", err))
		}
		d.ipvs.AdoptRecorded(recorded)
	}
	d.repair = repairIdle
	start := d.clockNow()
	nftErr := d.nft.Resync(plan)
	nftDone := d.clockNow()
	svcErrs, ipvsErr := ipvs.SplitErrors(d.ipvs.Resync(plan))
	d.lastResync = ResyncTimes{NFTables: nftDone.Sub(start), IPVS: d.clockNow().Sub(nftDone)}
	d.setFailures(svcErrs)
	return errors.Join(append(errs, wrap("nftables", nftErr), wrap("ipvs", ipvsErr))...)
}

// StartRepair begins a Repair of both writers against what they last
// programmed, without a plan (see DataPlaneWriter.StartRepair): the nftables table,
// set by set, then IPVS: one services dump and the addresses, then the
// virtual servers' destinations, slice by slice. Before the first Resync,
// or when one is due, it changes nothing and returns an error.
func (d *DataPlane) StartRepair() error {
	d.repair = repairIdle
	if !d.adopted || d.NeedsResync() {
		return errResyncDue
	}
	if err := d.nft.StartRepair(); err != nil {
		return wrap("nftables", err)
	}
	d.repair, d.failures = repairNFT, d.failures[:0]
	return nil
}

// RepairStep does the next slice of the Repair, for about budget or
// until stop reports true. The slices of one writer are its RepairStep's;
// starting the IPVS half (its services dump and the addresses) is a slice
// of its own.
func (d *DataPlane) RepairStep(budget time.Duration, stop func() bool) (done bool, err error) {
	switch d.repair {
	case repairNFT:
		done, err := d.nft.RepairStep(budget, stop)
		if err != nil {
			d.repair = repairIdle
			return true, wrap("nftables", err)
		}
		if done {
			d.repair = repairIPVSStart
		}
		return false, nil
	case repairIPVSStart:
		svcErrs, err := ipvs.SplitErrors(d.ipvs.StartRepair())
		d.addFailures(svcErrs)
		if err != nil {
			d.repair = repairIdle
			return true, wrap("ipvs", err)
		}
		d.repair = repairIPVS
		return false, nil
	case repairIPVS:
		done, err := d.ipvs.RepairStep(budget, stop)
		svcErrs, err := ipvs.SplitErrors(err)
		d.addFailures(svcErrs)
		if done || err != nil {
			d.repair = repairIdle
			return true, wrap("ipvs", err)
		}
		return false, nil
	}
	return true, nil
}

// NeedsResync reports whether the next sync must be a full Resync
// because an earlier one failed.
func (d *DataPlane) NeedsResync() bool { return d.nft.NeedsResync() || d.ipvs.NeedsResync() }

// IPVSOps counts the IPVS writer's kernel operations by kind.
func (d *DataPlane) IPVSOps() map[string]int { return d.ipvs.Ops() }

// Draining counts destinations draining after leaving the plan.
func (d *DataPlane) Draining() int { return d.ipvs.Draining() }

// ReconcileConntrack deletes the UDP conntrack flows rules calls stale:
// sent to one of our UDP virtual servers, replied from none of its
// serving endpoints (package proxier/udpflows).
func (d *DataPlane) ReconcileConntrack(rules policy.StaleUDPFlows) ([]udpflows.Result, error) {
	if d.ct == nil {
		return nil, nil
	}
	return d.ct.Reconcile(rules)
}

// Close releases the kernel handles.
func (d *DataPlane) Close() { d.ipvs.Close() }

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}
