package policy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
)

// Config is the node-wide configuration of the engine.
type Config struct {
	// NodeName is this node's name (--hostname-override).
	NodeName string
	// Scheduler is the default IPVS scheduler (--ipvs-scheduler); empty
	// means rr.
	Scheduler string
	// NodePortAddresses selects NodePort addresses (--nodeport-addresses):
	// CIDRs that filter this Node's InternalIP and ExternalIP addresses, or
	// "primary" for the node's primary IP of each family. Empty means every
	// InternalIP and ExternalIP.
	NodePortAddresses []string
	// ClusterCIDRs are the pod networks (--cluster-cidr). Traffic to a
	// ClusterIP from outside those of its family is masqueraded; with none
	// of its family, none is.
	ClusterCIDRs []string
	// LocalByInterface says this node's pods are told by the interface
	// their traffic comes in on (detectLocalMode BridgeInterface or
	// InterfaceNamePrefix), which holds for both families: traffic to a
	// ClusterIP of either is masqueraded from elsewhere, whatever
	// ClusterCIDRs hold, as kube-proxy.
	LocalByInterface bool
	// BindAddress, unless invalid or unspecified (0.0.0.0, ::), is this
	// node's primary IP of its family in place of the Node's, as
	// kube-proxy's bindAddress: for NodePortAddresses "primary" and for
	// whether a LoadBalancer's source ranges hold the node.
	BindAddress netip.Addr
	// MasqueradeAll masquerades all ClusterIP traffic (--masquerade-all).
	MasqueradeAll bool
	// NoTrackServices are marked NOTRACK as if annotated
	// kube-ipvs-proxy.io/notrack: "true" (--notrack-services).
	NoTrackServices []ServiceKey
	// RefuseNodeAddresses refuses an external or load-balancer IP that is
	// a Node's address (--refuse-node-address-external-ips). By default it
	// is served as kube-proxy's IPVS mode does: on the Service's ports,
	// without binding it on the dummy interface.
	RefuseNodeAddresses bool
	// MaxVirtualServers is the most virtual servers one Service may have
	// on this node (--max-virtual-servers-per-service); a Service asking
	// for more is not served (budget.go). 0 means no limit.
	MaxVirtualServers int
	// MaxVirtualServersPerNode is the most virtual servers of all Services
	// on this node, NodePorts included (--max-virtual-servers-per-node);
	// the youngest Services that do not fit are not served (budget.go). 0
	// means no limit.
	MaxVirtualServersPerNode int
}

// Engine indexes Services, EndpointSlices and Nodes so that one service's
// virtual servers are recomputed in O(that service's endpoints). It is not
// safe for concurrent use.
type Engine struct {
	cfg      Config
	prefixes []netip.Prefix
	primary  bool
	// clusterCIDR4 and clusterCIDR6 say whether --cluster-cidr has a
	// range of each family.
	clusterCIDR4, clusterCIDR6 bool

	self       *Node
	nodeIPs    []netip.Addr // NodePort addresses, sorted
	nodeLabels map[string]map[string]string
	// local holds this host's interface addresses (SetLocalAddresses),
	// sorted; haveLocal says they were given, which makes them the
	// NodePort addresses, as kube-proxy's IPVS mode.
	local     []netip.Addr
	haveLocal bool
	// nodeAddrs are the addresses of every Node the engine was given, by
	// node; addrNodes counts the nodes holding each.
	nodeAddrs map[string][]netip.Addr
	addrNodes map[netip.Addr]int

	claims claimIndex
	// clusterIPOf holds the services with each ClusterIP (two only while
	// one is deleted and another created with it); externalUsers, the
	// services listing each external or load-balancer IP.
	clusterIPOf, externalUsers map[netip.Addr][]ServiceKey
	// unmanaged holds the Services the proxy does not serve, with their
	// ClusterIPs, also indexed in clusterIPOf (unmanaged.go).
	unmanaged map[ServiceKey][]netip.Addr
	// heldLB holds the load-balancer IPs of the services the budget or
	// the ceiling refuses, by address; heldBy, by service (held.go).
	heldLB map[netip.Addr][]ServiceKey
	heldBy map[ServiceKey][]netip.Addr

	// nt indexes endpoints while noTrackServices (the NOTRACK services)
	// is not 0 (notrack.go).
	nt              noTrackIndex
	noTrackServices int

	// ceilingRefused holds the services the node-wide ceiling refuses,
	// with the virtual servers older services took (budget.go).
	ceilingRefused map[ServiceKey]int

	services   map[ServiceKey]*serviceEntry
	slices     map[ServiceKey][]*EndpointSlice // sorted by name
	sliceOwner map[sliceID]ServiceKey
}

type serviceEntry struct {
	svc      *Service
	settings settings
}

type sliceID struct{ namespace, name string }

// ServicePlan is the virtual servers of one service, sorted, and what its
// health check node port reports.
type ServicePlan struct {
	Service        ServiceKey
	VirtualServers []VirtualServer
	// HealthCheckNodePort is the service's healthCheckNodePort, or 0.
	HealthCheckNodePort uint16
	// LocalReadyEndpoints counts this node's ready endpoints by unique
	// address (a pod serving two ports counts once), as kube-proxy's
	// health check server reports.
	LocalReadyEndpoints int
	// Warnings are this plan's problems that concern no annotation: a
	// virtual server owned by another service, an external address that
	// is a node's. Each names the service.
	Warnings []Warning
	// UDPServing lists the service's UDP virtual servers whose port has
	// serving endpoints, with those endpoints: the rules of its UDP
	// conntrack flows (udpflows.go).
	UDPServing []UDPServing
}

// New validates cfg and returns an empty engine.
func New(cfg Config) (*Engine, error) {
	if cfg.Scheduler == "" {
		cfg.Scheduler = DefaultScheduler
	}
	if !IsSchedulerName(cfg.Scheduler) {
		return nil, fmt.Errorf("invalid scheduler %q: not an IPVS scheduler name", cfg.Scheduler)
	}
	e := &Engine{
		cfg:        cfg,
		nodeLabels: map[string]map[string]string{},
		services:   map[ServiceKey]*serviceEntry{},
		slices:     map[ServiceKey][]*EndpointSlice{},
		sliceOwner: map[sliceID]ServiceKey{},
		nodeAddrs:  map[string][]netip.Addr{},
		addrNodes:  map[netip.Addr]int{},
		claims:     newClaimIndex(),

		clusterIPOf:   map[netip.Addr][]ServiceKey{},
		externalUsers: map[netip.Addr][]ServiceKey{},
		unmanaged:     map[ServiceKey][]netip.Addr{},
		heldLB:        map[netip.Addr][]ServiceKey{},
		heldBy:        map[ServiceKey][]netip.Addr{},
	}
	for _, s := range cfg.NodePortAddresses {
		if s == "primary" {
			e.primary = true
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("invalid nodeport address %q: want a CIDR or \"primary\": %w", s, err)
		}
		e.prefixes = append(e.prefixes, p.Masked())
	}
	for _, s := range cfg.ClusterCIDRs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("invalid cluster CIDR %q: %w", s, err)
		}
		e.clusterCIDR4 = e.clusterCIDR4 || p.Addr().Is4()
		e.clusterCIDR6 = e.clusterCIDR6 || !p.Addr().Is4()
	}
	return e, nil
}

// UpsertService adds or replaces a service. It returns the warnings about
// its annotations; they do not stop the service from being served.
func (e *Engine) UpsertService(svc *Service) []Warning {
	st, ws := parseSettings("Service "+svc.Key.String(), svc.Annotations, svc.InternalLocal, e.cfg.Scheduler)
	st.noTrack = st.noTrack || slices.Contains(e.cfg.NoTrackServices, svc.Key)
	entry := &serviceEntry{svc: svc, settings: st}
	var old *Service
	prev, existed := e.services[svc.Key]
	wasNoTrack := existed && prev.settings.noTrack
	if existed {
		old = prev.svc
	}
	e.services[svc.Key] = entry
	affected := append(e.forgetUnmanaged(svc.Key), e.indexAddresses(svc.Key, old, svc)...)
	affected = append(affected, e.applyCeiling()...)
	e.claim(entry)
	e.reclaim(slices.DeleteFunc(affected, func(k ServiceKey) bool { return k == svc.Key }))
	if !existed || wasNoTrack != st.noTrack {
		e.setNoTrackCount(e.noTrackServices + boolInt(st.noTrack) - boolInt(wasNoTrack))
		e.markReassigned(e.noTrackReachable([]ServiceKey{svc.Key}))
	}
	delete(e.claims.reassigned, svc.Key)
	return ws
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (e *Engine) markReassigned(keys []ServiceKey) {
	for _, k := range keys {
		e.claims.reassigned[k] = struct{}{}
	}
}

// DeleteService forgets a service and releases its virtual servers to
// the next claimants (see Reassigned). Its slices stay indexed, so that a
// service recreated later finds them.
func (e *Engine) DeleteService(key ServiceKey) {
	if entry, ok := e.services[key]; ok {
		delete(e.services, key)
		e.reclaim(e.indexAddresses(key, entry.svc, nil))
		delete(e.ceilingRefused, key)
		e.setHeld(key, nil)
		e.reclaim(e.applyCeiling())
		e.markReassigned(e.noTrackReachable([]ServiceKey{key}))
		if entry.settings.noTrack {
			e.setNoTrackCount(e.noTrackServices - 1)
		}
	}
	e.claims.set(key, nil, nil)
	delete(e.claims.reassigned, key)
}

// UpsertEndpointSlice adds or replaces a slice and returns the services
// whose plans it may change: its service, and its previous service if the
// slice moved.
func (e *Engine) UpsertEndpointSlice(s *EndpointSlice) []ServiceKey {
	id := sliceID{s.Service.Namespace, s.Name}
	affected := e.DeleteEndpointSlice(id.namespace, id.name)
	list := e.slices[s.Service]
	i, _ := slices.BinarySearchFunc(list, s.Name, func(x *EndpointSlice, name string) int { return cmp.Compare(x.Name, name) })
	e.slices[s.Service] = slices.Insert(list, i, s)
	e.sliceOwner[id] = s.Service
	for _, k := range append(e.noTrackSliceChanged(id, s.Service, s), s.Service) {
		if !slices.Contains(affected, k) {
			affected = append(affected, k)
		}
	}
	return affected
}

// DeleteEndpointSlice forgets a slice and returns the service it fed, if
// any.
func (e *Engine) DeleteEndpointSlice(namespace, name string) []ServiceKey {
	id := sliceID{namespace, name}
	owner, ok := e.sliceOwner[id]
	if !ok {
		return nil
	}
	delete(e.sliceOwner, id)
	list := slices.DeleteFunc(e.slices[owner], func(x *EndpointSlice) bool { return x.Name == name })
	if len(list) == 0 {
		delete(e.slices, owner)
	} else {
		e.slices[owner] = list
	}
	affected := []ServiceKey{owner}
	for _, k := range e.noTrackSliceChanged(id, owner, nil) {
		if k != owner {
			affected = append(affected, k)
		}
	}
	return affected
}

// UpsertNode records a node. It reports whether it is this node, in which
// case every service's plan may change (addresses, zone, labels). A node
// given with addresses (InternalIPs, ExternalIPs) makes them node
// addresses, which external and load-balancer IPs may not take.
func (e *Engine) UpsertNode(n *Node) bool {
	e.nodeLabels[n.Name] = n.Labels
	return e.nodeChanged(n.Name, n, slices.Concat(n.InternalIPs, n.ExternalIPs))
}

// DeleteNode forgets a node. It reports whether it was this node.
func (e *Engine) DeleteNode(name string) bool {
	delete(e.nodeLabels, name)
	return e.nodeChanged(name, nil, nil)
}

// nodeChanged records a node's addresses and, for this node, the Node
// itself (nil when deleted). Claims are recomputed only when node
// addresses or this node's NodePort addresses moved, not for a label.
func (e *Engine) nodeChanged(name string, n *Node, addrs []netip.Addr) bool {
	users, addrsChanged := e.setNodeAddresses(name, addrs)
	if name != e.cfg.NodeName {
		// Another node's addresses change only how the services listing
		// them are served: not every service's claims.
		e.reclaim(users)
		return false
	}
	e.self = n
	old := e.nodeIPs
	e.nodeIPs = e.nodePortIPs()
	if addrsChanged || !slices.Equal(old, e.nodeIPs) {
		e.applyCeiling() // NodePort counts moved; every plan is recomputed
		e.reclaimAll()
	}
	return true
}

// SetLocalAddresses records this host's interface addresses, less the
// dummy interface's, loopback and IPv6 link-local ones (the caller
// filters). From then on they are the NodePort addresses, filtered by
// --nodeport-addresses CIDRs, as kube-proxy's IPVS mode serves NodePorts
// on every local address; "primary" still takes the Node's primary IPs.
// It reports whether anything changed, in which case every service's
// plan may change.
func (e *Engine) SetLocalAddresses(addrs []netip.Addr) bool {
	addrs = slices.Clone(addrs)
	slices.SortFunc(addrs, netip.Addr.Compare)
	addrs = slices.Compact(addrs)
	if e.haveLocal && slices.Equal(addrs, e.local) {
		return false
	}
	e.local, e.haveLocal = addrs, true
	e.nodeIPs = e.nodePortIPs()
	e.applyCeiling() // NodePort counts moved; every plan is recomputed
	e.reclaimAll()   // NodePort keys moved
	return true
}

// setNodeAddresses records a node's addresses and reports whether the
// set of node addresses changed, with the services listing an address
// that became or stopped being a node's.
func (e *Engine) setNodeAddresses(name string, addrs []netip.Addr) (users []ServiceKey, changed bool) {
	old := e.nodeAddrs[name]
	if slices.Equal(old, addrs) {
		return nil, false
	}
	// The services listing an address that becomes or stops being a
	// node's are served differently on it (bound or not), with no owner
	// changing: they are reported as reassigned for that.
	for _, a := range slices.Concat(old, addrs) {
		if slices.Contains(old, a) != slices.Contains(addrs, a) {
			for _, k := range e.externalUsers[a] {
				e.claims.reassigned[k] = struct{}{}
				if !slices.Contains(users, k) {
					users = append(users, k)
				}
			}
		}
	}
	// NOTRACK is refused on a node's address: the NOTRACK services'
	// refusal may change.
	for _, k := range e.noTrackKeys() {
		if !slices.Contains(users, k) {
			users = append(users, k)
		}
	}
	for _, a := range old {
		if e.addrNodes[a]--; e.addrNodes[a] <= 0 {
			delete(e.addrNodes, a)
		}
	}
	for _, a := range addrs {
		e.addrNodes[a]++
	}
	if len(addrs) == 0 {
		delete(e.nodeAddrs, name)
	} else {
		e.nodeAddrs[name] = slices.Clone(addrs)
	}
	return users, true
}

// isNodeAddress reports whether a is an InternalIP or ExternalIP of a
// Node the engine knows: the addresses Config.RefuseNodeAddresses refuses
// and the node-address warning names. The host's other interface
// addresses are not: one may be a load-balancer VIP that another agent
// (kube-vip, say) put on an interface, and its Service must be served.
func (e *Engine) isNodeAddress(a netip.Addr) bool { return e.addrNodes[a] > 0 }

// nodePortIPs picks this node's NodePort addresses: the host's local
// addresses when known, else the Node's InternalIP and ExternalIP
// addresses, filtered by the --nodeport-addresses CIDRs; with "primary",
// the Node's first InternalIP (else ExternalIP) of each family.
func (e *Engine) nodePortIPs() []netip.Addr {
	var out []netip.Addr
	n := e.self
	if n == nil {
		n = &Node{}
	}
	if e.primary {
		for _, v4 := range []bool{true, false} {
			if a, ok := e.primaryIP(v4); ok {
				out = append(out, a)
			}
		}
	}
	pool := slices.Concat(n.InternalIPs, n.ExternalIPs)
	if e.haveLocal {
		pool = e.local
	}
	for _, a := range pool {
		if e.primary && len(e.prefixes) == 0 {
			break
		}
		if len(e.prefixes) == 0 || slices.ContainsFunc(e.prefixes, func(p netip.Prefix) bool { return p.Contains(a) }) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// primaryIP is this node's primary IP of a family, as kube-proxy picks
// it: a specified BindAddress of the family, else from the Node: its
// first InternalIP of the family, else its first ExternalIP.
func (e *Engine) primaryIP(v4 bool) (netip.Addr, bool) {
	if b := e.cfg.BindAddress.Unmap(); b.IsValid() && !b.IsUnspecified() && b.Is4() == v4 {
		return b, true
	}
	if e.self == nil {
		return netip.Addr{}, false
	}
	if a, ok := firstOfFamily(e.self.InternalIPs, v4); ok {
		return a, true
	}
	return firstOfFamily(e.self.ExternalIPs, v4)
}

func firstOfFamily(ips []netip.Addr, v4 bool) (netip.Addr, bool) {
	for _, a := range ips {
		if a.Is4() == v4 {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// Services returns the keys of every service, sorted.
func (e *Engine) Services() []ServiceKey {
	keys := make([]ServiceKey, 0, len(e.services))
	for k := range e.services {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, ServiceKey.Compare)
	return keys
}

// ComputeService returns one service's virtual servers. ok is false when
// the service is unknown: its virtual servers should be removed.
func (e *Engine) ComputeService(key ServiceKey) (plan ServicePlan, ok bool) {
	entry, ok := e.services[key]
	if !ok {
		return ServicePlan{Service: key}, false
	}
	return e.servicePlan(key, entry), true
}

// ComputeAll returns every service's plan, sorted by service. A full
// sync computes them once and assembles the node's Plan from them.
func (e *Engine) ComputeAll() []ServicePlan {
	keys := e.Services()
	out := make([]ServicePlan, len(keys))
	for i, key := range keys {
		out[i] = e.servicePlan(key, e.services[key])
	}
	return out
}

func (e *Engine) servicePlan(key ServiceKey, entry *serviceEntry) ServicePlan {
	given := e.convertWarnings(key, entry.svc)
	if w, over := e.overBudget(entry.svc); over {
		return ServicePlan{Service: key, Warnings: append(given, w)}
	}
	if w, over := e.overCeiling(entry.svc); over {
		return ServicePlan{Service: key, Warnings: append(given, w)}
	}
	var ntw []Warning
	if entry.settings.noTrack {
		if w, refused := e.noTrackRefused(key); refused {
			tracked := *entry
			tracked.settings.noTrack = false
			entry, ntw = &tracked, []Warning{w}
		}
	}
	vss, local := e.virtualServers(entry)
	vss, ws := e.owned(key, vss)
	ws = slices.Concat(given, e.addressWarnings(entry.svc), e.heldWarnings(entry.svc), ntw, ws)
	return ServicePlan{Service: key, VirtualServers: vss,
		HealthCheckNodePort: entry.svc.HealthCheckNodePort, LocalReadyEndpoints: local, Warnings: ws,
		UDPServing: e.udpServing(entry.svc, vss)}
}

// convertWarnings are the warnings converting the service and its
// slices gave (Service.Warnings, EndpointSlice.Warnings), in a new
// slice: what they left out stays said while it lasts.
func (e *Engine) convertWarnings(key ServiceKey, svc *Service) []Warning {
	var out []Warning
	out = append(out, svc.Warnings...)
	for _, s := range e.slices[key] {
		out = append(out, s.Warnings...)
	}
	return out
}

// Compute returns the whole plan: Assemble(ComputeAll()).
func (e *Engine) Compute() (Plan, []Warning) { return e.Assemble(e.ComputeAll()) }

// Assemble merges per-service plans into this node's Plan. Ownership is
// already decided (each virtual server is in its owner's plan only); the
// warnings are the plans' own, then the cross-service ones (a
// destination shared by a NOTRACK and a tracked service).
func (e *Engine) Assemble(plans []ServicePlan) (Plan, []Warning) {
	total := 0
	var checks []HealthCheck
	var ws []Warning
	for _, sp := range plans {
		total += len(sp.VirtualServers)
		ws = append(ws, sp.Warnings...)
		if sp.HealthCheckNodePort != 0 {
			checks = append(checks, HealthCheck{Service: sp.Service, NodePort: sp.HealthCheckNodePort,
				LocalReadyEndpoints: sp.LocalReadyEndpoints})
		}
	}
	slices.SortFunc(checks, func(a, b HealthCheck) int { return a.Service.Compare(b.Service) })
	vss := make([]VirtualServer, 0, total)
	for _, sp := range plans {
		vss = append(vss, sp.VirtualServers...)
	}
	SortVirtualServers(vss)
	ws = append(ws, sharedNoTrackDestinations(vss)...)
	return Plan{Node: e.cfg.NodeName, VirtualServers: vss, HealthChecks: checks}, ws
}

// destinationKey is a destination as NOTRACK matches it: address,
// protocol and port.
type destinationKey struct {
	addr  netip.Addr
	proto Protocol
	port  uint16
}

// sharedNoTrackDestinations warns about destinations that a NOTRACK
// virtual server shares with a tracked one: a guard, since such a
// NOTRACK service is served tracked (notrack.go) and none should remain. NOTRACK is keyed on the
// destination for replies, so pods' connections through the tracked
// virtual server to it are tracked one way only, and TCP ones fail (seen
// in the VM lab); the warning names both services. Cost: nothing without NOTRACK services.
func sharedNoTrackDestinations(vss []VirtualServer) []Warning {
	noTrack := map[destinationKey]ServiceKey{}
	for _, vs := range vss {
		if vs.NoTrack {
			for _, d := range vs.Destinations {
				k := destinationKey{d.Address, vs.Protocol, d.Port}
				if _, ok := noTrack[k]; !ok {
					noTrack[k] = vs.Service
				}
			}
		}
	}
	if len(noTrack) == 0 {
		return nil
	}
	var ws []Warning
	seen := map[[2]ServiceKey]bool{}
	for _, vs := range vss {
		if vs.NoTrack {
			continue
		}
		for _, d := range vs.Destinations {
			owner, ok := noTrack[destinationKey{d.Address, vs.Protocol, d.Port}]
			if !ok || seen[[2]ServiceKey{owner, vs.Service}] {
				continue
			}
			seen[[2]ServiceKey{owner, vs.Service}] = true
			dest := netip.AddrPortFrom(d.Address, d.Port).String() + "/" + string(vs.Protocol)
			field := "metadata.annotations[" + AnnotationNoTrack + "]"
			ws = append(ws, Warning{Object: "Service " + vs.Service.String(), Field: field,
				Reason: ReasonNoTrackSharedDestination, Service: vs.Service,
				Message: fmt.Sprintf("destination %s is also a destination of NOTRACK Service %s: pods' connections to it through this service are tracked one way only, which breaks TCP; annotate both services alike",
					dest, owner)},
				Warning{Object: "Service " + owner.String(), Field: field,
					Reason: ReasonNoTrackSharedDestination, Service: owner,
					Message: fmt.Sprintf("destination %s is also a destination of tracked Service %s: pods' connections to it through that service are tracked one way only, which breaks TCP; annotate both services alike",
						dest, vs.Service)})
		}
	}
	return ws
}
