package proxier

import (
	"context"
	"net/netip"
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

// refreshHostAddresses re-reads the addresses; a change re-plans every
// service.
func (p *Proxier) refreshHostAddresses() {
	addrs, err := p.cfg.HostAddresses.List()
	if err != nil {
		p.log.Error(err, "Cannot list the host's addresses; keeping the previous ones")
		return
	}
	p.queued(p.t.setHostAddresses(addrs))
}
