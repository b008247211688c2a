package policy

import (
	"cmp"
	"iter"
	"net/netip"
	"slices"
)

// Kind says how traffic reaches a virtual server.
type Kind string

// The virtual server kinds, one per way a Service is addressed.
const (
	KindClusterIP    Kind = "ClusterIP"
	KindNodePort     Kind = "NodePort"
	KindExternalIP   Kind = "ExternalIP"
	KindLoadBalancer Kind = "LoadBalancer"
)

// External reports whether traffic of this kind comes from outside the
// cluster network, so that externalTrafficPolicy governs it.
func (k Kind) External() bool { return k != KindClusterIP }

// Protocol is a ServicePort protocol: TCP, UDP or SCTP.
type Protocol string

// Supported protocols.
const (
	ProtocolTCP  Protocol = "TCP"
	ProtocolUDP  Protocol = "UDP"
	ProtocolSCTP Protocol = "SCTP"
)

// protocolNumbers are the IP protocol numbers (IANA's, the kernel's
// IPPROTO_TCP, IPPROTO_UDP and IPPROTO_SCTP) that the IPVS and nftables
// writers program. They are written here once, as plain numbers, so that
// policy imports no golang.org/x/sys.
var protocolNumbers = [...]struct {
	p Protocol
	n uint8
}{{ProtocolTCP, 6}, {ProtocolUDP, 17}, {ProtocolSCTP, 132}}

// Number returns p's IP protocol number, or false for any protocol
// other than TCP, UDP and SCTP.
func (p Protocol) Number() (uint8, bool) {
	for _, e := range protocolNumbers {
		if e.p == p {
			return e.n, true
		}
	}
	return 0, false
}

// ProtocolOfNumber is the inverse of Protocol.Number: the protocol with IP
// protocol number n, or false when it is not TCP, UDP or SCTP.
func ProtocolOfNumber(n uint8) (Protocol, bool) {
	for _, e := range protocolNumbers {
		if e.n == n {
			return e.p, true
		}
	}
	return "", false
}

// TrafficPolicy names the selection a virtual server's destinations came from.
type TrafficPolicy string

// Traffic policies. Cluster and Local are kube-proxy's; the others are
// kube-ipvs-proxy's tiered extensions, which apply to ClusterIP only.
const (
	PolicyCluster      TrafficPolicy = "Cluster"
	PolicyLocal        TrafficPolicy = "Local"
	PolicyPreferLocal  TrafficPolicy = "PreferLocal"
	PolicyPreferZone   TrafficPolicy = "PreferZone"
	PolicyTopologyKeys TrafficPolicy = "TopologyKeys"
)

// Masquerade says when the data plane source-NATs a virtual server's
// traffic to the node's address.
type Masquerade string

// Masquerade modes. They apply to tracked traffic: NOTRACK applies only
// to traffic from pods (as detectLocalMode tells them: sources in
// --cluster-cidr, or what comes in on the pods' interfaces), which is
// never masqueraded, since masquerade needs conntrack.
const (
	MasqueradeAlways     Masquerade = "Always"     // external kinds under eTP=Cluster; --masquerade-all
	MasqueradeOffCluster Masquerade = "OffCluster" // ClusterIP, from sources that are not pods (detectLocalMode)
	MasqueradeNever      Masquerade = "Never"      // eTP=Local keeps the client IP
)

// EmptyAction is what happens to traffic for a virtual server without
// destinations.
type EmptyAction string

// Empty actions, as kube-proxy: reject (ICMP unreachable, so clients fail
// fast) when the service has no usable endpoint at all; drop when only
// local endpoints may serve it and this node has none.
const (
	EmptyReject EmptyAction = "Reject"
	EmptyDrop   EmptyAction = "Drop"
)

// Plan is this node's complete desired state: every virtual server, sorted
// by address, protocol and port.
type Plan struct {
	Node           string          `json:"node"`
	VirtualServers []VirtualServer `json:"virtualServers"`
	// HealthChecks lists the services with a healthCheckNodePort, by
	// namespace/name.
	HealthChecks []HealthCheck `json:"healthChecks,omitempty"`
}

// HealthCheck is what a service's healthCheckNodePort server reports.
type HealthCheck struct {
	Service             ServiceKey `json:"service"`
	NodePort            uint16     `json:"nodePort"`
	LocalReadyEndpoints int        `json:"localReadyEndpoints"`
}

// VirtualServer is one IPVS virtual server and the destinations this node
// may send its traffic to. A virtual server with no destinations still
// exists: the data plane rejects or drops its traffic.
type VirtualServer struct {
	Service                   ServiceKey    `json:"service"`
	PortName                  string        `json:"portName"`
	Kind                      Kind          `json:"kind"`
	Address                   netip.Addr    `json:"address"`
	Port                      uint16        `json:"port"`
	Protocol                  Protocol      `json:"protocol"`
	Scheduler                 string        `json:"scheduler"`
	SchedulerFlags            []string      `json:"schedulerFlags,omitempty"`
	PersistenceTimeoutSeconds uint32        `json:"persistenceTimeoutSeconds"`
	TrafficPolicy             TrafficPolicy `json:"trafficPolicy"`
	NoTrack                   bool          `json:"noTrack,omitempty"`
	Masquerade                Masquerade    `json:"masquerade"`
	// WhenEmpty is set only when Destinations is empty.
	WhenEmpty EmptyAction `json:"whenEmpty,omitempty"`
	// InternalVia, on an eTP=Local external virtual server, is the
	// service's ClusterIP and port of this family: traffic to it from pods
	// (as detectLocalMode tells them) and from the node itself goes there, to
	// the internal traffic policy's destinations, as in kube-proxy's
	// iptables and nftables modes; only external clients are held to this
	// node's endpoints, with their address kept. Unset for a load balancer
	// with source ranges, whose clients are all checked against them.
	InternalVia netip.AddrPort `json:"internalVia,omitzero"`
	// SourceRanges restricts a LoadBalancer virtual server's clients
	// (loadBalancerSourceRanges of its family); empty means any.
	SourceRanges []netip.Prefix `json:"sourceRanges,omitempty"`
	// NodeInSourceRanges, on a load balancer with SourceRanges, says one
	// of them holds this node's primary IP of the family, so the node's
	// own connections pass: they come from the load balancer's address,
	// bound on the dummy interface. Otherwise they are dropped, as
	// kube-proxy's IPVS mode decides (KUBE-LOAD-BALANCER-SOURCE-IP and
	// KUBE-IPVS-OUT-FILTER).
	NodeInSourceRanges bool `json:"nodeInSourceRanges,omitempty"`
	// OnNodeAddress, on an ExternalIP or LoadBalancer virtual server, says
	// its address is a node's: it is served as a NodePort is, not bound on
	// the dummy interface and not in the VIP filter (see Bound).
	OnNodeAddress bool          `json:"onNodeAddress,omitempty"`
	Destinations  []Destination `json:"destinations"`
	Reason        string        `json:"reason"`
}

// Bound reports whether the virtual server's address belongs on the
// dummy interface and in the VIP filter (traffic to it on other ports is
// rejected): a ClusterIP, and an external or load-balancer IP that is no
// node address. A NodePort and an external address on a node address
// sit on the node's own address, whose other ports are the node's.
func (vs *VirtualServer) Bound() bool { return vs.Kind != KindNodePort && !vs.OnNodeAddress }

// Destination is one backend of a virtual server.
type Destination struct {
	Address netip.Addr `json:"address"`
	Port    uint16     `json:"port"`
	// Local says the endpoint runs on this node: only such a destination
	// can be its own client through the virtual server (hairpin). It sits
	// beside Port so that a Destination stays 32 bytes.
	Local  bool  `json:"local,omitempty"`
	Weight int32 `json:"weight"`
}

// VirtualServerKey identifies a virtual server in the kernel.
type VirtualServerKey struct {
	Address  netip.Addr
	Protocol Protocol
	Port     uint16
}

// Key returns the kernel identity of the virtual server.
func (vs *VirtualServer) Key() VirtualServerKey {
	return VirtualServerKey{Address: vs.Address, Protocol: vs.Protocol, Port: vs.Port}
}

// String renders the key as 10.96.0.1:80/TCP or [fd00::1]:80/TCP.
func (k VirtualServerKey) String() string {
	return netip.AddrPortFrom(k.Address, k.Port).String() + "/" + string(k.Protocol)
}

// Compare orders keys by address, then protocol, then port.
func (k VirtualServerKey) Compare(o VirtualServerKey) int {
	if c := k.Address.Compare(o.Address); c != 0 {
		return c
	}
	if c := cmp.Compare(k.Protocol, o.Protocol); c != 0 {
		return c
	}
	return cmp.Compare(k.Port, o.Port)
}

func compareVirtualServers(a, b VirtualServer) int { return a.Key().Compare(b.Key()) }

func compareDestinations(a, b Destination) int {
	if c := a.Address.Compare(b.Address); c != 0 {
		return c
	}
	return cmp.Compare(a.Port, b.Port)
}

// SortVirtualServers puts virtual servers in plan order.
func SortVirtualServers(vss []VirtualServer) { slices.SortFunc(vss, compareVirtualServers) }

// Services yields the plan's virtual servers grouped by service, in
// service order (ServiceKey.Compare), each service's in plan order: the
// shape Apply takes, so that a writer's Resync and Apply share one path.
// It is the only place a plan is regrouped. It makes no copy of the plan:
// each group is copied into one buffer, reused from group to group, so a
// group is valid only until the next one is yielded (its capacity ends at
// its last) and a caller that keeps one clones it. A writer's Resync of a
// whole plan, which translates each group and keeps none, then holds one
// service's virtual servers at a time besides the plan, not a second plan.
func (p Plan) Services() iter.Seq2[ServiceKey, []VirtualServer] {
	return func(yield func(ServiceKey, []VirtualServer) bool) {
		order := p.serviceOrder()
		var group []VirtualServer
		for i := 0; i < len(order); {
			svc := p.VirtualServers[order[i]].Service
			group = group[:0]
			for ; i < len(order) && p.VirtualServers[order[i]].Service == svc; i++ {
				group = append(group, p.VirtualServers[order[i]])
			}
			if !yield(svc, group[:len(group):len(group)]) {
				return
			}
		}
	}
}

// serviceOrder returns the indexes of the plan's virtual servers in
// Services' order.
func (p Plan) serviceOrder() []int32 {
	order := make([]int32, len(p.VirtualServers))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := p.VirtualServers[a].Service.Compare(p.VirtualServers[b].Service); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return order
}
