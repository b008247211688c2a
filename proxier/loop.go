package proxier

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/backoff"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/kubeclient"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// Defaults, as kube-proxy's IPVS mode (--ipvs-min-sync-period defaults
// to 0: every change syncs at once).
const (
	DefaultSyncPeriod       = 30 * time.Second
	DefaultConfigSyncPeriod = 15 * time.Minute
	// DefaultNodeWatchLinger is how long the watch of all Nodes' labels
	// outlives the last topology-keys service.
	DefaultNodeWatchLinger = 10 * time.Minute
)

// Config configures the sync loop.
type Config struct {
	// NodeName is this node's name (--hostname-override).
	NodeName string
	// Engine configures the policy engine; its NodeName is set to
	// NodeName.
	Engine policy.Config
	// ServiceProxyName is --service-proxy-name: empty serves Services
	// without the service.kubernetes.io/service-proxy-name label, set
	// serves exactly the Services labelled with it.
	ServiceProxyName string
	// DropExternalIPs serves no Service's spec.externalIPs: the feature
	// gate AllowServiceExternalIPs=false, as kube-proxy.
	DropExternalIPs bool
	// MinSyncPeriod is the minimum interval between syncs
	// (--ipvs-min-sync-period); 0 syncs on every change.
	MinSyncPeriod time.Duration
	// SyncPeriod is the interval of the periodic resync
	// (--ipvs-sync-period); 0 means DefaultSyncPeriod. It is a repair in
	// slices (repair.go) when the DataPlane can (StartRepair does not
	// answer ErrNoRepair), else a full Resync of a freshly computed plan. A failed sync is
	// retried as a Resync, with backoff from 1 s up to SyncPeriod (at
	// once when it was incremental), or at the next change; a failure
	// confined to one service does not fail the sync (faults.go).
	SyncPeriod time.Duration
	// NodeWatchLinger is how long the watch of all Nodes' labels
	// outlives the last topology-keys service, so that toggling the
	// annotation does not relist every Node each time; 0 means
	// DefaultNodeWatchLinger, negative stops it at once.
	NodeWatchLinger time.Duration
	// ProbeInterval is how often, while idle, the loop checks cheaply
	// that our kernel objects still exist (DataPlane.Check); 0 means DefaultProbeInterval, negative never.
	ProbeInterval time.Duration
	// ConfigSyncPeriod is the informers' resync period
	// (--config-sync-period); 0 means DefaultConfigSyncPeriod.
	ConfigSyncPeriod time.Duration
	// Client reads Services, EndpointSlices and this node's Node.
	Client kubeclient.Interface
	// MetadataClient reads the other Nodes' labels (metadata only), while
	// some service uses the topology-keys annotation.
	MetadataClient metadata.Interface
	// DataPlane programs the kernel.
	DataPlane DataPlaneWriter
	// Observer, Health and ServiceHealth may be nil.
	Observer      Observer
	Health        Health
	ServiceHealth ServiceHealth
	// Recorder, if set, receives a Warning Event (reason
	// InvalidAnnotation) per invalid kube-ipvs-proxy.io annotation of a
	// Service, once per service, annotation and message.
	Recorder record.EventRecorder
	// OnPlan, if set, is called after each sync with the whole current
	// plan (--dry-run watch mode).
	OnPlan func(policy.Plan)
	// HostAddresses, if set, gives this host's interface addresses: the
	// NodePort addresses, as kube-proxy's IPVS mode. Without it, the
	// Node's status addresses are used (--dry-run).
	HostAddresses HostAddresses
	// ReleaseMemory, if set, runs the collector tighter through the
	// informers' first lists (listGCPercent) and a full sync
	// (fullSyncGCPercent), and returns freed heap to the OS
	// (debug.FreeOSMemory, beside the loop): after a successful full
	// sync or periodic repair, and once the loop has been quiet a while
	// after the heap grew (memory.go). A full sync holds the whole plan
	// and its kernel batch at once, a repair reads the whole kernel
	// table back, and a burst of changes leaves the heap at its GC goal:
	// otherwise RSS would stay well above the live heap (benchmarks/NOTES.md,
	// memory).
	ReleaseMemory bool
}

// Stats counts what the loop did, for tests and debugging.
type Stats struct {
	Syncs     int // syncs run, full and incremental
	FullSyncs int // of which full (DataPlane.Resync, or a periodic repair)
	Repairs   int // of which periodic repairs in slices
	// Repairing reports a periodic repair in progress (syncs between
	// its slices are counted as they end).
	Repairing bool
	// LastRepair describes the last periodic repair.
	LastRepair RepairStats
	Applies    int // DataPlane.Apply calls
	Failures   int // syncs whose data plane call failed
	LastFull   bool
	// LastChanged lists, sorted, the services the last incremental sync
	// passed to Apply; nil after a full sync.
	LastChanged []policy.ServiceKey
	LastError   error
	// NodeInformer reports whether the node metadata informer runs, and
	// how often it started and stopped.
	NodeInformer                          bool
	NodeInformerStarts, NodeInformerStops int
}

// Proxier is the sync loop: informers feed one policy engine, and a
// bounded-frequency runner programs what changed.
type Proxier struct {
	cfg       Config
	clock     clock.Clock
	log       klog.Logger
	obs       Observer
	health    Health
	svcHealth ServiceHealth
	dp        DataPlaneWriter // cfg.DataPlane
	// changed says a change was queued since the last sync began: a
	// repair syncs it between two slices.
	changed atomic.Bool
	// releasing: a ReleaseMemory collection is under way.
	releasing atomic.Bool
	// freeOSMemory is debug.FreeOSMemory, setGCPercent
	// debug.SetGCPercent, and residentHeap and heapAllocated the
	// functions of those names; tests replace them.
	freeOSMemory  func()
	setGCPercent  func(int) int
	residentHeap  func() uint64
	heapAllocated func() uint64
	// releasedResident and releasedAllocated are the resident heap and
	// the bytes allocated so far, read after the last release.
	releasedResident  atomic.Uint64
	releasedAllocated atomic.Uint64
	// releasedAt is when the loop last started a release.
	releasedAt time.Time
	// hostAddrMu orders host-address refreshes; hostAddrRetrying says
	// one is scheduled after a failed List, hostAddrRetry after how long
	// (hostAddressRetry; tests shorten it).
	hostAddrMu       sync.Mutex
	hostAddrRetrying atomic.Bool
	hostAddrRetry    time.Duration
	// stopping is Run's ctx.Done(): a repair stops at its next slice
	// when it is closed (nil before Run: never).
	stopping <-chan struct{}
	// failing maps each failing service to the error last reported
	// (sync goroutine only).
	failing  map[policy.ServiceKey]string
	services cache.Store // the Services informer's cache, for Events

	t          *tracker
	nodes      *nodeWatch
	events     *annotationEvents
	planEvents *planEvents // the sync goroutine's
	runner     *runner
	running    atomic.Bool

	st syncState // the sync goroutine's

	statsMu sync.Mutex
	stats   Stats
}

// New validates cfg and returns a Proxier; Run starts it.
func New(cfg Config) (*Proxier, error) {
	switch {
	case cfg.NodeName == "":
		return nil, errors.New("node name is required")
	case cfg.Client == nil || cfg.MetadataClient == nil:
		return nil, errors.New("a client and a metadata client are required")
	case cfg.DataPlane == nil:
		return nil, errors.New("a data plane is required")
	}
	if cfg.SyncPeriod == 0 {
		cfg.SyncPeriod = DefaultSyncPeriod
	}
	if cfg.ConfigSyncPeriod == 0 {
		cfg.ConfigSyncPeriod = DefaultConfigSyncPeriod
	}
	switch {
	case cfg.SyncPeriod < 0 || cfg.ConfigSyncPeriod < 0:
		return nil, fmt.Errorf("sync period %v and config sync period %v must be positive", cfg.SyncPeriod, cfg.ConfigSyncPeriod)
	case cfg.MinSyncPeriod < 0 || cfg.MinSyncPeriod > cfg.SyncPeriod:
		return nil, fmt.Errorf("min sync period %v must be between 0 and the sync period %v", cfg.MinSyncPeriod, cfg.SyncPeriod)
	}
	cfg.Engine.NodeName = cfg.NodeName
	engine, err := policy.New(cfg.Engine)
	if err != nil {
		return nil, fmt.Errorf("policy engine: %w", err)
	}
	p := &Proxier{cfg: cfg, log: klog.Background(),
		obs: cfg.Observer, health: cfg.Health, svcHealth: cfg.ServiceHealth, events: newAnnotationEvents(cfg.Recorder),
		planEvents: newPlanEvents(cfg.Recorder), hostAddrRetry: hostAddressRetry}
	if p.obs == nil {
		p.obs = nopObserver{}
	}
	if p.health == nil {
		p.health = nopHealth{}
	}
	if p.svcHealth == nil {
		p.svcHealth = nopServiceHealth{}
	}
	p.dp = cfg.DataPlane
	p.failing = map[policy.ServiceKey]string{}
	if p.cfg.ProbeInterval == 0 {
		p.cfg.ProbeInterval = DefaultProbeInterval
	}
	p.st = newSyncState()
	p.setClock(clock.RealClock{})
	p.t = newTracker(engine, cfg.NodeName, p.serviceConv(), p.clock.Now())
	if p.cfg.NodeWatchLinger == 0 {
		p.cfg.NodeWatchLinger = DefaultNodeWatchLinger
	}
	delayed, ok := p.clock.(clock.WithDelayedExecution)
	if !ok {
		delayed = clock.RealClock{}
	}
	p.nodes = &nodeWatch{client: cfg.MetadataClient, resync: cfg.ConfigSyncPeriod, t: p.t, changed: p.queued,
		linger: p.cfg.NodeWatchLinger, clock: delayed}
	return p, nil
}

// setClock replaces the clock; tests only, before Run.
func (p *Proxier) setClock(c clock.Clock) {
	p.clock = c
	// A failed sync is retried with backoff from 1 s up to SyncPeriod
	// (kube-proxy waits SyncPeriod); it is then a full Resync.
	p.runner = newRunner(p.syncOnce, p.cfg.MinSyncPeriod, p.cfg.SyncPeriod, backoff.Initial, c)
	p.runner.withProbe(p.cfg.ProbeInterval, p.probe)
	if p.t != nil {
		p.t.since = c.Now()
	}
	if d, ok := c.(clock.WithDelayedExecution); ok && p.nodes != nil {
		p.nodes.clock = d
	}
}

// Run starts the informers, waits for their caches, makes the first full
// Resync and then syncs until ctx is done. It never flushes the kernel:
// on exit, or while the apiserver is unreachable (the informers retry
// with backoff), the last programmed state stays. It returns nil when ctx
// ends, and an error only if it cannot start.
func (p *Proxier) Run(ctx context.Context) error {
	if !p.running.CompareAndSwap(false, true) {
		return errors.New("proxier: Run called twice")
	}
	p.log = klog.FromContext(ctx)
	p.stopping = ctx.Done()
	p.t.mu.Lock()
	p.t.logger = p.log
	p.t.mu.Unlock()
	// Health: the first sync is pending from the start, so a proxy that
	// never syncs (the apiserver unreachable, the data plane failing)
	// turns unhealthy after the health timeout, as kube-proxy.
	p.health.QueuedUpdate()
	set, err := p.newInformers()
	if err != nil {
		return err
	}
	p.services = set.informers[0].GetStore() // the Services informer
	// The informers' first lists fill the caches the first sync reads:
	// they run under a tighter collector too (memory.go).
	restoreGC := p.tightenGC(listGCPercent)
	p.watchHostAddresses(ctx)
	p.nodes.run(ctx)
	set.start(ctx)
	defer p.stopInformers(set)
	p.log.Info("Waiting for informer caches to sync", "node", p.cfg.NodeName)
	synced := cache.WaitForCacheSync(ctx.Done(), set.synced...) && p.nodes.waitSynced(ctx)
	restoreGC()
	if !synced {
		return nil // ctx done
	}
	p.log.Info("Informer caches synced; starting the sync loop", "minSyncPeriod", p.cfg.MinSyncPeriod,
		"syncPeriod", p.cfg.SyncPeriod)
	p.runner.Run()
	p.runner.Loop(ctx)
	return nil
}

// informerStopWait bounds how long Run waits for the informers to stop
// once ctx is done. A reflector backing off from an unreachable API
// server notices the stop only when its backoff (up to 30 s) ends, which
// would outlast a pod's termination grace period; kube-proxy does not
// wait for its informers at all.
const informerStopWait = 2 * time.Second

// stopInformers stops the informers and waits for them, at most
// informerStopWait; those still running end on their own.
func (p *Proxier) stopInformers(set *informerSet) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.nodes.shutdown()
		set.shutdown()
	}()
	t := p.clock.NewTimer(informerStopWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C():
		p.log.Info("Not waiting longer for the informers to stop", "waited", informerStopWait)
	}
}

func (p *Proxier) logger() klog.Logger { return p.log }

// queued reports an event's change and, if some service must be
// recomputed, requests a sync.
func (p *Proxier) queued(c change) {
	if c.svcChange {
		p.obs.ServiceChanges(c.svcPending, 1)
	}
	if c.epChange {
		p.obs.EndpointChanges(c.epPending, 1)
	}
	if !c.dirty {
		return
	}
	p.changed.Store(true)
	p.obs.Queued()
	p.health.QueuedUpdate()
	p.runner.Run()
}

// Stats returns a copy of the counters.
func (p *Proxier) Stats() Stats {
	p.statsMu.Lock()
	s := p.stats
	p.statsMu.Unlock()
	s.LastChanged = slices.Clone(s.LastChanged)
	s.NodeInformer, s.NodeInformerStarts, s.NodeInformerStops = p.nodes.state()
	return s
}
