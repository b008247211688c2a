package proxier

import (
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/udpflows"
)

// The seams between the sync loop and the components it drives. Each is
// small enough for tests to fake; nil Observer, Health and ServiceHealth
// in Config mean "not wanted".

// DataPlaneWriter is the loop's one seam to the kernel: it programs
// plans, confines failures to the services they concern, repairs drift
// in slices and checks its kernel objects cheaply. *DataPlane implements
// it; tests fake it.
type DataPlaneWriter interface {
	// Apply programs the given services' virtual servers; a ServicePlan
	// without virtual servers removes the service's.
	Apply(changes []policy.ServicePlan) error
	// Resync makes the kernel match the whole plan.
	Resync(plan policy.Plan) error
	// NeedsResync reports whether the next sync must be a Resync.
	NeedsResync() bool

	// StartRepair begins a repair of drift against what was last
	// programmed (the last Resync's plan with the Applies since),
	// without a plan, in slices between which the caller may Apply
	// changes. It fails, changing nothing, when a Resync is due
	// (NeedsResync, or no Resync yet). ErrNoRepair says the data plane
	// cannot repair in slices: the periodic resync is then a Resync of
	// the whole plan.
	StartRepair() error
	// RepairStep does the next slice, for about budget or until stop
	// (consulted between the slice's units; nil: never) reports true, and
	// reports done after the last one or an error. Its errors are
	// Apply's: failures confined to one service are in ServiceFailures
	// (accumulated over the Repair and the Applies between its slices),
	// any other one ends the Repair and makes NeedsResync true.
	RepairStep(budget time.Duration, stop func() bool) (done bool, err error)

	// ServiceFailures lists the per-service failures of the last Apply or
	// Resync; that call's error does not include them.
	ServiceFailures() []ServiceFailure
	// Failing lists the services still failing, sorted.
	Failing() []policy.ServiceKey
	// NextRetry is when Apply should be called (with no changes, if
	// none) to retry failed services; zero when none failed.
	NextRetry() time.Time
	// Check verifies cheaply that the kernel objects the last sync
	// programmed still exist; an error means NeedsResync is now true.
	Check() error

	// IPVSOps counts kernel operations by kind, cumulatively; the loop
	// reports it to the Observer after each sync.
	IPVSOps() map[string]int
	// Draining counts destinations draining after leaving the plan.
	Draining() int

	// ReconcileConntrack deletes the UDP conntrack flows rules calls
	// stale (kube-proxy's conntrack reconciler, package
	// proxier/udpflows) and returns each family's result, also with an
	// error.
	ReconcileConntrack(rules policy.StaleUDPFlows) ([]udpflows.Result, error)
}

// ErrNoRepair is StartRepair's answer from a data plane that does not
// repair in slices.
var ErrNoRepair = errors.New("the data plane does not repair in slices")

// NopDataPlane programs nothing (--dry-run): it does not repair in
// slices, fails no service and has no kernel objects to check. A data
// plane that implements only part of DataPlaneWriter may embed it.
type NopDataPlane struct{}

func (NopDataPlane) Apply([]policy.ServicePlan) error { return nil }
func (NopDataPlane) Resync(policy.Plan) error         { return nil }
func (NopDataPlane) NeedsResync() bool                { return false }
func (NopDataPlane) StartRepair() error               { return ErrNoRepair }
func (NopDataPlane) RepairStep(time.Duration, func() bool) (bool, error) {
	return true, ErrNoRepair
}
func (NopDataPlane) ServiceFailures() []ServiceFailure { return nil }
func (NopDataPlane) Failing() []policy.ServiceKey      { return nil }
func (NopDataPlane) NextRetry() time.Time              { return time.Time{} }
func (NopDataPlane) Check() error                      { return nil }
func (NopDataPlane) IPVSOps() map[string]int           { return nil }
func (NopDataPlane) Draining() int                     { return 0 }
func (NopDataPlane) ReconcileConntrack(policy.StaleUDPFlows) ([]udpflows.Result, error) {
	return nil, nil
}

// ServiceFailure is one service's data-plane failure: some of its virtual
// servers could not be programmed while the rest of the sync succeeded.
type ServiceFailure struct {
	Service policy.ServiceKey
	Reason  string // a short CamelCase cause, e.g. ipvs.ReasonKernelError
	Err     error
}

// Observer receives the sync loop's metrics. Package metrics implements
// it.
type Observer interface {
	SyncStarted()                                   // a sync begins
	SyncDone(full bool, d time.Duration, err error) // kubeproxy_sync_proxy_rules_duration_seconds, _last_timestamp_seconds
	Queued()                                        // kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds
	// ServiceChanges sets the pending gauge and adds total to the
	// counter: (pending, 1) on each Service change, (pending, 0) when a
	// sync takes the changes.
	ServiceChanges(pending int, total int)
	EndpointChanges(pending int, total int)    // the same for EndpointSlices
	NetworkProgrammingLatency(d time.Duration) // kubeproxy_network_programming_duration_seconds
	// NoLocalEndpoints is the number of services whose internal
	// (iTP=Local) or external (eTP=Local) virtual servers drop traffic
	// because this node has no endpoint while the service has some; set
	// after each sync.
	NoLocalEndpoints(trafficPolicy string, n int)
	VirtualServers(byKind map[policy.Kind]int) // kube_ipvs_proxy_virtual_servers{kind}
	IPVSOps(ops map[string]int)                // cumulative counts from the writer
	Draining(n int)                            // kube_ipvs_proxy_draining_destinations
	// ServiceFailure counts one service's failure by reason
	// (kube_ipvs_proxy_service_sync_errors_total{reason}).
	ServiceFailure(reason string)
	// FailingServices is the number of services being retried
	// (kube_ipvs_proxy_failing_services).
	FailingServices(n int)
	// ConntrackReconciled observes one family's UDP conntrack reconcile:
	// how long it took and how many flows it deleted
	// (kubeproxy_conntrack_reconciler_sync_duration_seconds,
	// kubeproxy_conntrack_reconciler_deleted_entries_total).
	ConntrackReconciled(family corev1.IPFamily, d time.Duration, deleted int)
}

// Health is the proxy's /healthz and /livez state. Package health
// implements it.
type Health interface {
	QueuedUpdate()              // a change is pending
	Updated()                   // a sync applied
	SyncNode(node *corev1.Node) // deletion timestamp / ToBeDeletedByClusterAutoscaler taint → 503
}

// ServiceHealth runs the healthCheckNodePort servers. Package health
// implements it.
type ServiceHealth interface {
	// SyncServices says which services need a server on which port.
	SyncServices(ports map[policy.ServiceKey]uint16) error
	// SyncEndpoints gives the local ready endpoints of those services.
	SyncEndpoints(localReady map[policy.ServiceKey]int) error
}

var (
	_ DataPlaneWriter = (*DataPlane)(nil)
	_ DataPlaneWriter = NopDataPlane{}
)

// Traffic policy label values of Observer.NoLocalEndpoints.
const (
	TrafficPolicyInternal = "internal"
	TrafficPolicyExternal = "external"
)

type nopObserver struct{}

func (nopObserver) SyncStarted()                                            {}
func (nopObserver) SyncDone(bool, time.Duration, error)                     {}
func (nopObserver) Queued()                                                 {}
func (nopObserver) ServiceChanges(int, int)                                 {}
func (nopObserver) EndpointChanges(int, int)                                {}
func (nopObserver) NetworkProgrammingLatency(time.Duration)                 {}
func (nopObserver) NoLocalEndpoints(string, int)                            {}
func (nopObserver) VirtualServers(map[policy.Kind]int)                      {}
func (nopObserver) IPVSOps(map[string]int)                                  {}
func (nopObserver) Draining(int)                                            {}
func (nopObserver) ServiceFailure(string)                                   {}
func (nopObserver) FailingServices(int)                                     {}
func (nopObserver) ConntrackReconciled(corev1.IPFamily, time.Duration, int) {}

type nopHealth struct{}

func (nopHealth) QueuedUpdate()         {}
func (nopHealth) Updated()              {}
func (nopHealth) SyncNode(*corev1.Node) {}

type nopServiceHealth struct{}

func (nopServiceHealth) SyncServices(map[policy.ServiceKey]uint16) error { return nil }
func (nopServiceHealth) SyncEndpoints(map[policy.ServiceKey]int) error   { return nil }
