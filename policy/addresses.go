package policy

import (
	"fmt"
	"net/netip"
	"slices"
)

// Which addresses a service may be served on, besides its ClusterIP: the
// external and load-balancer IPs that are nobody else's. An address that
// is any Service's ClusterIP is refused on every port (the apiserver gave
// it to that Service whole). An address that is a node's is served as
// kube-proxy's IPVS mode serves it: on the service's ports only, like a
// NodePort, not bound on the dummy interface and not in the VIP filter,
// so that the node's other ports are untouched; or, with
// Config.RefuseNodeAddresses, not at all.

// maxFrontends bounds the frontends of one service port in one family:
// ClusterIP, NodePort, and bound and unbound ExternalIP and LoadBalancer.
const maxFrontends = 6

// frontend is one kind of virtual server of one service port in one
// family: its addresses and port, and whether the addresses are node
// addresses, served unbound.
type frontend struct {
	kind   Kind
	addrs  []netip.Addr
	port   uint16
	onNode bool
}

// frontends appends to out the addresses a service port is served on in
// the family of its i-th ClusterIP: that ClusterIP, this node's NodePort
// addresses, and its external and load-balancer IPs that it may have.
func (e *Engine) frontends(out []frontend, svc *Service, sp ServicePort, i int) []frontend {
	v4 := svc.ClusterIPs[i].Is4()
	out = append(out, frontend{kind: KindClusterIP, addrs: svc.ClusterIPs[i : i+1], port: sp.Port})
	if sp.NodePort != 0 {
		if a := ofFamily(e.nodeIPs, v4); len(a) > 0 {
			out = append(out, frontend{kind: KindNodePort, addrs: a, port: sp.NodePort})
		}
	}
	out = e.externalFrontends(out, KindExternalIP, e.unheld(svc.ExternalIPs), v4, sp.Port)
	return e.externalFrontends(out, KindLoadBalancer, svc.LoadBalancerIPs, v4, sp.Port)
}

// externalFrontends appends the addresses of one external kind and
// family that are served: those bound on the dummy interface, then those
// on node addresses.
func (e *Engine) externalFrontends(out []frontend, kind Kind, addrs []netip.Addr, v4 bool, port uint16) []frontend {
	var bound, onNode []netip.Addr
	for _, a := range addrs {
		if a.Is4() != v4 {
			continue
		}
		switch e.externalUse(a) {
		case useBound:
			bound = append(bound, a)
		case useOnNode:
			onNode = append(onNode, a)
		}
	}
	if len(bound) > 0 {
		out = append(out, frontend{kind: kind, addrs: bound, port: port})
	}
	if len(onNode) > 0 {
		out = append(out, frontend{kind: kind, addrs: onNode, port: port, onNode: true})
	}
	return out
}

func ofFamily(addrs []netip.Addr, v4 bool) []netip.Addr {
	var out []netip.Addr
	for _, a := range addrs {
		if a.Is4() == v4 {
			out = append(out, a)
		}
	}
	return out
}

// addressUse is how an external or load-balancer IP is served.
type addressUse uint8

const (
	useBound          addressUse = iota // bound on the dummy interface
	useOnNode                           // a node address: served unbound
	useRefusedNode                      // a Node's address, refused (Config.RefuseNodeAddresses)
	useRefusedCluster                   // a Service's ClusterIP
	useRefusedClass                     // an address no Service may take (AddressRefusal)
)

// broadcast is the IPv4 limited broadcast address.
var broadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// AddressRefusal says why no Service may take a, as an external or
// load-balancer IP or as an endpoint, and "" when one may: loopback and
// unspecified addresses are the node's own (a Service on 127.0.0.1:2379
// would take etcd's port on every control-plane node), link-local ones
// belong to one link (169.254.169.254 is the cloud metadata service),
// and multicast and broadcast addresses name no one host. An
// IPv4-mapped IPv6 address is judged as its IPv4 address.
func AddressRefusal(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case !a.IsValid():
		return "not an address"
	case a.IsLoopback():
		return "a loopback address"
	case a.IsUnspecified():
		return "the unspecified address"
	case a.IsLinkLocalUnicast():
		return "a link-local address"
	case a.IsMulticast():
		return "a multicast address"
	case a == broadcast:
		return "the broadcast address"
	}
	return ""
}

// externalUse decides how an external or load-balancer IP is served. A
// node address is a Node's InternalIP or ExternalIP (any Node the engine
// was given) or an address of this host's interfaces (SetLocalAddresses):
// kube-proxy's IPVS mode binds none of its host's addresses.
func (e *Engine) externalUse(a netip.Addr) addressUse {
	switch {
	case AddressRefusal(a) != "":
		return useRefusedClass
	case len(e.clusterIPOf[a]) > 0:
		return useRefusedCluster
	case e.isNodeAddress(a) && e.cfg.RefuseNodeAddresses:
		return useRefusedNode
	case e.isNodeAddress(a) || e.isLocalAddress(a):
		return useOnNode
	}
	return useBound
}

// isLocalAddress reports whether a is an address of this host's
// interfaces, other than the dummy interface's.
func (e *Engine) isLocalAddress(a netip.Addr) bool {
	_, ok := slices.BinarySearchFunc(e.local, a, netip.Addr.Compare)
	return ok
}

// indexAddresses records svc's ClusterIPs and the external and
// load-balancer IPs it lists (nil svc: it is gone), replacing old's. It
// returns the other services whose claims a ClusterIP moving in or out
// changes: those listing it as an external or load-balancer IP.
func (e *Engine) indexAddresses(key ServiceKey, old, svc *Service) []ServiceKey {
	var oldCIPs, newCIPs, oldExt, newExt []netip.Addr
	if old != nil {
		oldCIPs, oldExt = old.ClusterIPs, slices.Concat(old.ExternalIPs, old.LoadBalancerIPs)
	}
	if svc != nil {
		newCIPs, newExt = svc.ClusterIPs, slices.Concat(svc.ExternalIPs, svc.LoadBalancerIPs)
	}
	editIndex(e.externalUsers, key, oldExt, newExt)
	var affected []ServiceKey
	for _, a := range editIndex(e.clusterIPOf, key, oldCIPs, newCIPs) {
		for _, k := range e.externalUsers[a] {
			if k != key && !slices.Contains(affected, k) {
				affected = append(affected, k)
			}
		}
	}
	return affected
}

// editIndex moves key from the entries of the addresses in old to those
// in now, and returns the addresses whose entry changed.
func editIndex(idx map[netip.Addr][]ServiceKey, key ServiceKey, old, now []netip.Addr) []netip.Addr {
	var changed []netip.Addr
	for _, a := range old {
		if slices.Contains(now, a) {
			continue
		}
		list := slices.DeleteFunc(idx[a], func(k ServiceKey) bool { return k == key })
		if len(list) == 0 {
			delete(idx, a)
		} else {
			idx[a] = list
		}
		changed = append(changed, a)
	}
	for _, a := range now {
		if slices.Contains(old, a) || slices.Contains(idx[a], key) {
			continue
		}
		idx[a] = append(idx[a], key)
		changed = append(changed, a)
	}
	return changed
}

// reclaim recomputes the claims of services whose addresses another
// service's change moved, and reports them reassigned: their plans and
// warnings change even where no ownership does.
func (e *Engine) reclaim(keys []ServiceKey) {
	for _, k := range keys {
		if entry, ok := e.services[k]; ok {
			e.claim(entry)
			e.claims.reassigned[k] = struct{}{}
		}
	}
}

// addressWarnings names the external and load-balancer IPs of svc that
// are not served as given: of a family it has no ClusterIP of (not
// served, as in kube-proxy, but said), an address no Service may take
// (refused), a Service's ClusterIP (refused), a Node's address (served
// unbound, or refused).
func (e *Engine) addressWarnings(svc *Service) []Warning {
	var ws []Warning
	var has4, has6 bool
	for _, c := range svc.ClusterIPs {
		has4, has6 = has4 || c.Is4(), has6 || !c.Is4()
	}
	check := func(field string, addrs []netip.Addr) {
		for _, a := range addrs {
			w := Warning{Object: "Service " + svc.Key.String(), Field: field, Service: svc.Key}
			if a.Is4() && !has4 || !a.Is4() && !has6 {
				w.Reason = ReasonAddressFamilyNotServed
				w.Message = fmt.Sprintf("%s is %s and the Service has no %s ClusterIP; not served", a, family(a), family(a))
				ws = append(ws, w)
				continue
			}
			switch e.externalUse(a) {
			case useRefusedClass:
				w.Reason = ReasonRefusedAddress
				w.Message = fmt.Sprintf("%s is %s, which no Service may take; not served", a, AddressRefusal(a))
			case useRefusedCluster:
				w.Reason = ReasonClusterIPAddress
				w.Message = fmt.Sprintf("%s is the ClusterIP of Service %s, which owns it on every port; not served here",
					a, e.clusterIPOf[a][0])
			case useRefusedNode:
				w.Reason = ReasonNodeAddress
				w.Message = fmt.Sprintf("%s is a node's address; not served, so that the node keeps it", a)
			case useOnNode:
				if !e.isNodeAddress(a) {
					continue // a host address no Node lists (a VIP another agent put there)
				}
				w.Reason = ReasonNodeAddress
				w.Message = fmt.Sprintf("%s is a node's address; served on the Service's ports without binding it, the node's other ports untouched", a)
			default:
				continue
			}
			ws = append(ws, w)
		}
	}
	check("spec.externalIPs", svc.ExternalIPs)
	check("status.loadBalancer.ingress.ip", svc.LoadBalancerIPs)
	return ws
}

// family names a's address family.
func family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}
