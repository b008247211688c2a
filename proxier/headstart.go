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
	// Cold reports whether nothing of ours is programmed on the node
	// (and no Resync ran): only then is there a head start to give.
	Cold() (bool, error)
	// HeadStart is given the whole plan without endpoints
	// (policy.Plan.WithoutEndpoints) while the EndpointSlices are still
	// being listed. It programs at once what must come first and returns
	// the slow rest (nil if there is nothing to do), which the caller
	// runs beside the informers and the first Resync: that Resync waits
	// for it where they meet. An error means no head start; the first
	// Resync programs everything, as without one.
	HeadStart(plan policy.Plan) (rest func() error, err error)
}

// Cold reports whether the kernel holds no table of ours and no Resync
// ran: a fresh node, or one kube-proxy ran.
func (d *DataPlane) Cold() (bool, error) {
	if d.adopted {
		return false, nil
	}
	programmed, err := d.nft.Programmed()
	if err != nil {
		return false, wrap("nftables", err)
	}
	return !programmed, nil
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
	if cold, err := d.Cold(); err != nil || !cold {
		return nil, err
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

// startInformers starts the informers and, on a cold node, gives the data
// plane its head start (DataPlaneHeadStart). There the EndpointSlices'
// informer starts only once the Services and this Node are listed: the
// lists share one connection to the apiserver, and listed together the
// Services end when the EndpointSlices do, too late for a head start.
// The plan without endpoints is then programmed while the EndpointSlices
// are listed. On a node programmed before, every informer starts at once
// and nothing is programmed before the first sync. It returns a function
// that waits for the part of the head start that goes on in the
// background.
func (p *Proxier) startInformers(ctx context.Context, set *informerSet) (wait func()) {
	wait = func() {}
	hs, ok := p.cfg.DataPlane.(DataPlaneHeadStart)
	cold := false
	if ok {
		var err error
		switch cold, err = hs.Cold(); {
		case err != nil:
			p.log.Error(err, "Cannot tell whether this node was programmed before; no head start")
		case !cold:
			p.log.Info("No head start: this node's data plane was programmed before")
		}
	}
	if !cold {
		set.start(ctx)
		return wait
	}
	set.startServicesAndNode(ctx)
	listed := cache.WaitForCacheSync(ctx.Done(), set.servicesSynced, set.nodeSynced)
	set.startSlices(ctx)
	if !listed {
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
