package proxier

import (
	"context"

	"k8s.io/client-go/tools/cache"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// DataPlaneHeadStart is optionally implemented by a DataPlaneWriter that
// can program part of a plan before the first Resync. *DataPlane
// implements it. Without it, a cold start programs everything in the
// first Resync, after every informer has listed.
type DataPlaneHeadStart interface {
	// HeadStart is given the whole plan without endpoints
	// (policy.Plan.WithoutEndpoints) while the EndpointSlices are still
	// being listed. It programs at once what must come first and returns
	// the slow rest (nil if there is nothing to do), which the caller
	// runs beside the informers and the first Resync: that Resync waits
	// for it where they meet. An error means no head start; the first
	// Resync programs everything, as without one.
	HeadStart(plan policy.Plan) (rest func() error, err error)
}

// HeadStart programs, on a cold node, what of plan can be programmed
// before the endpoints are known; plan must have no endpoints
// (policy.Plan.WithoutEndpoints). It writes the nftables table for plan
// at once, so that the virtual IPs' host ports are filtered before any
// is bound and nothing is rejected for want of endpoints, and returns the
// IPVS part: the dummy interface's missing addresses and the missing
// virtual servers, without destinations (ipvs.Writer.HeadStart), the
// cold start's longest stretch of one-request-at-a-time kernel work. That
// part may run concurrently with Resync, whose IPVS half waits for it.
//
// A node is cold when the kernel holds no table of ours. On a node an
// earlier run programmed (a restart), or once a Resync ran, HeadStart
// does nothing: traffic flows through what is there, and a table for a
// plan without endpoints would take the hairpin and empty-service
// elements from it until the first Resync.
func (d *DataPlane) HeadStart(plan policy.Plan) (rest func() error, err error) {
	if d.adopted {
		return nil, nil
	}
	programmed, err := d.nft.Programmed()
	if err != nil {
		return nil, wrap("nftables", err)
	}
	if programmed {
		return nil, nil
	}
	if err := d.adopt(); err != nil {
		return nil, err
	}
	if err := d.nft.Resync(plan); err != nil {
		return nil, wrap("nftables", err)
	}
	return func() error { return wrap("ipvs", d.ipvs.HeadStart(plan)) }, nil
}

var _ DataPlaneHeadStart = (*DataPlane)(nil)

// headStart gives the data plane a head start on a cold start (see
// DataPlaneHeadStart): once the Services and this node are listed, while
// the EndpointSlices, the longest list, still are, it programs the plan
// without endpoints. It returns a function that waits for the part that
// goes on in the background. With no head start to give (the data plane
// has none, the EndpointSlices were listed first, ctx ended) it does
// nothing.
func (p *Proxier) headStart(ctx context.Context, set *informerSet) (wait func()) {
	wait = func() {}
	hs, ok := p.cfg.DataPlane.(DataPlaneHeadStart)
	if !ok || !cache.WaitForCacheSync(ctx.Done(), set.servicesSynced, set.nodeSynced) {
		return wait
	}
	if set.slicesSynced() {
		p.log.Info("No head start: the EndpointSlices were listed by the time the Services and the Node were")
		return wait
	}
	start := p.clock.Now()
	plan := p.t.preview().WithoutEndpoints()
	rest, err := hs.HeadStart(plan)
	switch {
	case err != nil:
		p.log.Error(err, "Head start failed; the first sync programs everything")
		return wait
	case rest == nil:
		p.log.Info("No head start: this node's data plane was programmed before")
		return wait
	}
	p.log.Info("Head start: programming the virtual servers while the EndpointSlices are listed",
		"virtualServers", len(plan.VirtualServers))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := rest(); err != nil {
			p.log.Error(err, "Head start incomplete; the first sync programs the rest")
			return
		}
		p.log.Info("Head start done", "virtualServers", len(plan.VirtualServers), "elapsed", p.clock.Since(start))
	}()
	return func() { <-done }
}
