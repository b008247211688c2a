package proxier

import (
	"context"
	"net/netip"
	"time"
)

// HostAddresses is the seam to this host's interface addresses (package
// proxier/hostaddr in the real mode). Once known, they are the NodePort
// addresses (filtered by --nodeport-addresses) and node addresses that no
// Service's external IP may take.
type HostAddresses interface {
	// List returns the usable addresses, sorted.
	List() ([]netip.Addr, error)
	// Watch calls changed after each change of the host's addresses,
	// until ctx ends.
	Watch(ctx context.Context, changed func())
}

// watchHostAddresses reads the host's addresses once before the first
// sync, then follows their changes.
func (p *Proxier) watchHostAddresses(ctx context.Context) {
	if p.cfg.HostAddresses == nil {
		return
	}
	p.refreshHostAddresses()
	go p.cfg.HostAddresses.Watch(ctx, p.refreshHostAddresses)
}

// hostAddressRetry is how long after a failed List the addresses are
// read again. A List can fail for as long as addresses keep changing
// (the kernel marks a dump that spans such a change interrupted, and at
// a cold start the IPVS writer adds a VIP after another); waiting for
// the next address event instead could keep a node-address change
// unseen for good.
const hostAddressRetry = time.Second

// refreshHostAddresses re-reads the addresses; a change re-plans every
// service. On failure it keeps the previous ones and tries again after
// p.hostAddrRetry. The watch and the retry may call it at once:
// hostAddrMu keeps an older List from being applied after a newer one.
func (p *Proxier) refreshHostAddresses() {
	p.hostAddrMu.Lock()
	defer p.hostAddrMu.Unlock()
	addrs, err := p.cfg.HostAddresses.List()
	if err != nil {
		p.log.Error(err, "Cannot list the host's addresses; keeping the previous ones", "retryIn", p.hostAddrRetry)
		p.retryHostAddresses()
		return
	}
	p.queued(p.t.setHostAddresses(addrs))
}

// retryHostAddresses schedules one refresh after p.hostAddrRetry, unless
// one is already pending or the proxier is stopping.
func (p *Proxier) retryHostAddresses() {
	if !p.hostAddrRetrying.CompareAndSwap(false, true) {
		return
	}
	time.AfterFunc(p.hostAddrRetry, func() {
		p.hostAddrRetrying.Store(false)
		select {
		case <-p.stopping:
			return
		default:
		}
		p.refreshHostAddresses()
	})
}
