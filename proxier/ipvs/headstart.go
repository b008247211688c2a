package ipvs

import (
	"errors"
	"maps"
	"net/netip"
	"slices"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// HeadStart programs, before the first Resync, what of plan is missing
// from the kernel and can simply be added: the dummy interface, the
// addresses planned virtual servers bind, and the virtual servers that do
// not exist, with the destinations plan gives them. It reads the kernel
// first (adopting what AdoptRecorded named) and deletes and changes
// nothing: a virtual server that exists keeps its settings and
// destinations, and an address no planned virtual server binds stays.
// The proxier calls it on a cold node with a plan without endpoints
// (policy.Plan.WithoutEndpoints) while the EndpointSlices are still
// being listed.
//
// The next Resync trusts the mirror HeadStart leaves, which is the kernel
// as read plus what HeadStart added, instead of reading the kernel again
// (at 10,000 services that read is over 20,000 netlink requests), unless
// a failure made NeedsResync true. Once the Writer has read the kernel
// (any Apply, Resync or earlier HeadStart), HeadStart does nothing.
// Failures are Apply's: a *ServiceError for a service's virtual server or
// address; the Resync that follows programs the service again.
func (w *Writer) HeadStart(plan policy.Plan) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return nil
	}
	var errs []error
	if err := w.start(true); err != nil {
		if !w.started {
			return err
		}
		errs = append(errs, err)
	}
	b := w.newBatch(w.cfg.Now())
	for _, sp := range plan.ByService() {
		b.service(sp.Service, sp.VirtualServers)
	}
	for _, k := range slices.SortedFunc(maps.Keys(w.want), Key.Compare) {
		if w.mirror[k] == nil {
			b.virtualServer(k, w.want[k].svc, false)
		}
	}
	for _, a := range slices.SortedFunc(maps.Keys(w.addrRefs), netip.Addr.Compare) {
		if _, ok := w.bound[a]; !ok {
			b.address(a, b.addrBy[a]...)
		}
	}
	b.run()
	// The Resync that follows records the whole plan's desired state
	// and retries what failed here.
	w.resetDesired()
	w.failed = map[policy.ServiceKey]*retry{}
	w.headStarted = !w.full
	return errors.Join(append(errs, b.errs...)...)
}
