package apiconv

import (
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// Trimming: the informers keep only what the converters above (and the
// control loop's bookkeeping) read, so that a cache of 10k Services and
// 100k endpoints is not a cache of everything kubectl and the controllers
// wrote on them. Each Trim function builds its result from a list of the
// fields it keeps, so a field added to the API later is dropped, not
// kept; converting a trimmed object gives what converting the original
// gives (TestTrimKeepsTheConversion). A field a converter starts to read
// must be added here too.
//
// Every Trim keeps name, namespace, resourceVersion, the creation and
// deletion timestamps and (but for EndpointSlices) the UID: the informers
// key, compare and delete by them, and Events reference the object by
// them.

// maxInterned bounds an Interner: past it, it starts afresh, so names of
// nodes long gone are not kept for ever.
const maxInterned = 1 << 16

// Interner makes the objects it trims share equal strings and equal
// read-only parts: node and zone names, hints, namespaces, port names,
// conditions. Decoding gives every object its own copy of each; 100k
// endpoints on a few hundred nodes need a few hundred. Objects trimmed
// with one Interner share memory, so they must be read-only, as every
// object of an informer's cache already is. The slices converted with
// one (EndpointSliceInterned) share their endpoints' Places likewise.
// Safe for concurrent use.
type Interner struct {
	mu     sync.Mutex
	strs   map[string]*string
	hints  map[hintsKey]*discoveryv1.EndpointHints
	places map[policy.Place]*policy.Place
	// bools holds the shared false and true.
	bools [2]*bool
}

// hintsKey identifies hints for at most one zone and one node, the forms
// the EndpointSlice controller writes; others are not shared.
type hintsKey struct {
	zone, node       string
	hasZone, hasNode bool
}

// NewInterner returns an empty Interner.
func NewInterner() *Interner {
	f, t := false, true
	return &Interner{strs: map[string]*string{}, hints: map[hintsKey]*discoveryv1.EndpointHints{},
		places: map[policy.Place]*policy.Place{}, bools: [2]*bool{&f, &t}}
}

// makeRoomLocked starts afresh when the Interner holds maxInterned
// strings, hints and places together: what it handed out stays valid,
// but is no longer shared with what it hands out next.
func (in *Interner) makeRoomLocked() {
	if len(in.strs)+len(in.hints)+len(in.places) >= maxInterned {
		clear(in.strs)
		clear(in.hints)
		clear(in.places)
	}
}

// String returns the shared copy of s.
func (in *Interner) String(s string) string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return *in.ptrLocked(s)
}

func (in *Interner) ptrLocked(s string) *string {
	if p, ok := in.strs[s]; ok {
		return p
	}
	in.makeRoomLocked()
	p := &s
	in.strs[s] = p
	return p
}

// strPtrLocked returns a shared pointer to *p's value; nil stays nil.
func (in *Interner) strPtrLocked(p *string) *string {
	if p == nil {
		return nil
	}
	return in.ptrLocked(*p)
}

func (in *Interner) boolPtrLocked(p *bool) *bool {
	switch {
	case p == nil:
		return nil
	case *p:
		return in.bools[1]
	}
	return in.bools[0]
}

func (in *Interner) hintsLocked(h *discoveryv1.EndpointHints) *discoveryv1.EndpointHints {
	if h == nil || len(h.ForZones) > 1 || len(h.ForNodes) > 1 {
		return h
	}
	var k hintsKey
	if len(h.ForZones) == 1 {
		k.zone, k.hasZone = h.ForZones[0].Name, true
	}
	if len(h.ForNodes) == 1 {
		k.node, k.hasNode = h.ForNodes[0].Name, true
	}
	if shared, ok := in.hints[k]; ok {
		return shared
	}
	in.makeRoomLocked()
	out := &discoveryv1.EndpointHints{}
	if k.hasZone {
		out.ForZones = []discoveryv1.ForZone{{Name: *in.ptrLocked(k.zone)}}
	}
	if k.hasNode {
		out.ForNodes = []discoveryv1.ForNode{{Name: *in.ptrLocked(k.node)}}
	}
	in.hints[k] = out
	return out
}

// Place returns the shared Place of an endpoint on node in zone, nil
// when both are empty (policy.Endpoint's Place for neither). The engine
// never modifies a Place, so every endpoint on one node and zone, in any
// slice, can hold the same one: 100k endpoints on a few hundred nodes
// need a few hundred.
func (in *Interner) Place(node, zone string) *policy.Place {
	if node == "" && zone == "" {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	k := policy.Place{NodeName: node, Zone: zone}
	if shared, ok := in.places[k]; ok {
		return shared
	}
	in.makeRoomLocked()
	out := &policy.Place{}
	if node != "" {
		out.NodeName = *in.ptrLocked(node)
	}
	if zone != "" {
		out.Zone = *in.ptrLocked(zone)
	}
	in.places[*out] = out // keyed by the interned strings, not the caller's
	return out
}

// trimMeta keeps the identity of an object, and of its labels and
// annotations those keep says.
func (in *Interner) trimMetaLocked(m *metav1.ObjectMeta, keep func(key string, label bool) bool) metav1.ObjectMeta {
	out := metav1.ObjectMeta{Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion,
		CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp}
	if m.Namespace != "" {
		out.Namespace = *in.ptrLocked(m.Namespace)
	}
	out.Labels = keepKeys(m.Labels, func(k string) bool { return keep(k, true) })
	out.Annotations = keepKeys(m.Annotations, func(k string) bool { return keep(k, false) })
	return out
}

// keepKeys returns the entries of m whose key keep accepts, or nil for
// none; m itself when it keeps them all.
func keepKeys(m map[string]string, keep func(string) bool) map[string]string {
	n := 0
	for k := range m {
		if keep(k) {
			n++
		}
	}
	switch {
	case n == 0:
		return nil
	case n == len(m):
		return m
	}
	out := make(map[string]string, n)
	for k, v := range m {
		if keep(k) {
			out[k] = v
		}
	}
	return out
}

// TrimService keeps of svc what Service reads: the service-proxy-name
// label, the kube-ipvs-proxy.io annotations, the spec's addresses, ports,
// policies and affinity, and the load balancer ingress IPs.
func (in *Interner) TrimService(svc *corev1.Service) *corev1.Service {
	in.mu.Lock()
	defer in.mu.Unlock()
	s := &svc.Spec
	out := &corev1.Service{TypeMeta: svc.TypeMeta,
		ObjectMeta: in.trimMetaLocked(&svc.ObjectMeta, func(k string, label bool) bool {
			if label {
				return k == LabelServiceProxyName
			}
			return strings.HasPrefix(k, policy.AnnotationPrefix)
		}),
		Spec: corev1.ServiceSpec{Type: s.Type, ClusterIP: s.ClusterIP, ClusterIPs: s.ClusterIPs, ExternalIPs: s.ExternalIPs,
			LoadBalancerSourceRanges: s.LoadBalancerSourceRanges, SessionAffinity: s.SessionAffinity,
			SessionAffinityConfig: s.SessionAffinityConfig, InternalTrafficPolicy: s.InternalTrafficPolicy,
			ExternalTrafficPolicy: s.ExternalTrafficPolicy, HealthCheckNodePort: s.HealthCheckNodePort},
	}
	if len(s.Ports) > 0 {
		out.Spec.Ports = make([]corev1.ServicePort, len(s.Ports))
		for i, p := range s.Ports {
			out.Spec.Ports[i] = corev1.ServicePort{Name: *in.ptrLocked(p.Name), Protocol: p.Protocol, Port: p.Port, NodePort: p.NodePort}
		}
	}
	if ing := svc.Status.LoadBalancer.Ingress; len(ing) > 0 { // every entry: errors name its index
		out.Status.LoadBalancer.Ingress = make([]corev1.LoadBalancerIngress, len(ing))
		for i, g := range ing {
			out.Status.LoadBalancer.Ingress[i] = corev1.LoadBalancerIngress{IP: g.IP, IPMode: g.IPMode}
		}
	}
	return out
}

// TrimEndpointSlice keeps of s what EndpointSlice reads, and the
// last-change-trigger-time annotation (network programming latency):
// the service-name label, the address type, the ports, and each
// endpoint's first address, conditions, node, zone and hints.
func (in *Interner) TrimEndpointSlice(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := &discoveryv1.EndpointSlice{TypeMeta: s.TypeMeta,
		ObjectMeta: in.trimMetaLocked(&s.ObjectMeta, func(k string, label bool) bool {
			if label {
				return k == LabelServiceName
			}
			return k == corev1.EndpointsLastChangeTriggerTime
		}),
		AddressType: s.AddressType,
	}
	out.UID = "" // Events name Services, never slices
	if len(s.Ports) > 0 {
		out.Ports = make([]discoveryv1.EndpointPort, len(s.Ports))
		for i, p := range s.Ports {
			out.Ports[i] = discoveryv1.EndpointPort{Name: in.strPtrLocked(p.Name), Protocol: p.Protocol, Port: p.Port}
		}
	}
	if len(s.Endpoints) > 0 {
		out.Endpoints = make([]discoveryv1.Endpoint, len(s.Endpoints))
		for i := range s.Endpoints {
			e := &s.Endpoints[i]
			addrs := e.Addresses
			if len(addrs) > 1 { // only the first is read, as kube-proxy
				addrs = []string{addrs[0]}
			}
			out.Endpoints[i] = discoveryv1.Endpoint{Addresses: addrs,
				Conditions: discoveryv1.EndpointConditions{Ready: in.boolPtrLocked(e.Conditions.Ready),
					Serving: in.boolPtrLocked(e.Conditions.Serving), Terminating: in.boolPtrLocked(e.Conditions.Terminating)},
				NodeName: in.strPtrLocked(e.NodeName), Zone: in.strPtrLocked(e.Zone), Hints: in.hintsLocked(e.Hints)}
		}
	}
	return out
}

// TrimNode keeps of n what Node and the health server read: its labels,
// taints and addresses.
func (in *Interner) TrimNode(n *corev1.Node) *corev1.Node {
	in.mu.Lock()
	defer in.mu.Unlock()
	return &corev1.Node{TypeMeta: n.TypeMeta,
		ObjectMeta: in.trimMetaLocked(&n.ObjectMeta, func(_ string, label bool) bool { return label }),
		Spec:       corev1.NodeSpec{Taints: n.Spec.Taints},
		Status:     corev1.NodeStatus{Addresses: n.Status.Addresses},
	}
}

// TrimNodeMetadata keeps of another node's metadata its identity and
// labels (topology keys may name any label).
func (in *Interner) TrimNodeMetadata(m *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	in.mu.Lock()
	defer in.mu.Unlock()
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta,
		ObjectMeta: in.trimMetaLocked(&m.ObjectMeta, func(_ string, label bool) bool { return label })}
}
