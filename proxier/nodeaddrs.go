package proxier

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/apiconv"
)

// Every Node's addresses. An external or load-balancer IP that is any
// Node's address must be served unbound on every node, never bound on
// the dummy interface: bound on node-2, node-1's InternalIP would take
// the replies node-1's masqueraded connections get. So the Nodes informer
// watches every Node (not only this node's, as kube-proxy does), and
// keeps of another node only its name, resource version and InternalIP
// and ExternalIP addresses: a few hundred bytes each (README, "Node
// addresses"). A Node update that leaves them alone, such as the
// kubelet's periodic status report, changes nothing downstream.

// otherNode is another node's Node as the Nodes informer's cache holds
// it.
type otherNode struct {
	identity
	addrs []netip.Addr // sorted
}

// newOtherNode keeps n's identity and addresses. An address that is no
// IP is skipped (apiconv.Node warns; this node's Node reports it).
func newOtherNode(n *corev1.Node) *otherNode {
	out := &otherNode{identity: identity{name: interner.String(n.Name), resourceVersion: n.ResourceVersion}}
	conv, _, err := apiconv.Node(n)
	if err != nil { // an empty name: no node to hold addresses
		return out
	}
	if a := slices.Concat(conv.InternalIPs, conv.ExternalIPs); len(a) > 0 {
		slices.SortFunc(a, netip.Addr.Compare)
		out.addrs = slices.Clip(slices.Compact(a))
	}
	return out
}

// onOtherNode applies another node's add or update; an update with the
// same addresses (a status report) is dropped here.
func (p *Proxier) onOtherNode(old, obj any) {
	n, ok := objectOf[*otherNode](obj)
	if !ok {
		return
	}
	if o, ok := objectOf[*otherNode](old); ok && slices.Equal(o.addrs, n.addrs) {
		return
	}
	p.queued(p.t.setNodeAddresses(n.name, n.addrs))
}
