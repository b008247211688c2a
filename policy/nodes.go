package policy

import (
	"net/netip"
	"slices"
)

// Other nodes, fed in halves. The real mode learns every Node's
// addresses from one watch and, only while a topology-keys service
// needs them, other nodes' labels from another: each half is set
// without touching the other. This node's Node is given whole, with
// UpsertNode.

// SetNodeAddresses records the InternalIP and ExternalIP addresses of a
// node other than this one (nil: it has none, or is gone), leaving its
// labels alone. They become node addresses: an external or load-balancer
// IP equal to one is served unbound, on every node, so that no node
// binds another's address on the dummy interface. It reports whether the
// node addresses changed; the services listing an address that changed
// are then reported by Reassigned. This node's name is ignored: its
// Node is given with UpsertNode.
func (e *Engine) SetNodeAddresses(name string, addrs []netip.Addr) bool {
	if name == e.cfg.NodeName {
		return false
	}
	addrs = slices.Clone(addrs)
	slices.SortFunc(addrs, netip.Addr.Compare)
	addrs = slices.Compact(addrs)
	users, changed := e.setNodeAddresses(name, addrs)
	e.reclaim(users)
	return changed
}

// SetNodeLabels records the labels of a node other than this one (nil:
// forgets them), for topology keys, leaving its addresses alone. This
// node's name is ignored: its Node is given with UpsertNode.
func (e *Engine) SetNodeLabels(name string, labels map[string]string) {
	if name == e.cfg.NodeName {
		return
	}
	if labels == nil {
		delete(e.nodeLabels, name)
		return
	}
	e.nodeLabels[name] = labels
}
