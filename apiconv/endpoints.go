package apiconv

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// EndpointSlice converts s. It returns (nil, nil) for slices the engine
// does not use: FQDN slices and slices without the service-name label.
// Its endpoints share a Place only with the endpoint before them, on the
// same node in the same zone; EndpointSliceInterned shares them across
// slices.
func EndpointSlice(s *discoveryv1.EndpointSlice) (*policy.EndpointSlice, error) {
	return EndpointSliceInterned(s, nil)
}

// EndpointSliceInterned converts s as EndpointSlice does, but gives its
// endpoints the Places that in hands out (Interner.Place), shared with
// every slice converted through in: a slice's ten endpoints usually run
// on ten nodes, so sharing only within it gains nothing. A nil in makes
// it EndpointSlice.
func EndpointSliceInterned(s *discoveryv1.EndpointSlice, in *Interner) (*policy.EndpointSlice, error) {
	out, _, err := endpointSlice(s, in, false)
	return out, err
}

// EndpointSliceKeepValid converts s as EndpointSlice does, except that an
// invalid endpoint is left out, with an error naming it in bad, instead
// of failing the whole slice: the slice's other endpoints are kept.
// --dry-run reads slices this way; the API server never serves an
// invalid endpoint.
func EndpointSliceKeepValid(s *discoveryv1.EndpointSlice) (out *policy.EndpointSlice, bad []error, err error) {
	return endpointSlice(s, nil, true)
}

func endpointSlice(s *discoveryv1.EndpointSlice, in *Interner, keepValid bool) (*policy.EndpointSlice, []error, error) {
	obj := ObjectName("EndpointSlice", s.Namespace, s.Name)
	if s.Name == "" {
		return nil, nil, invalid(obj, "metadata.name", "must not be empty")
	}
	svcName := s.Labels[LabelServiceName]
	if svcName == "" || s.AddressType == discoveryv1.AddressTypeFQDN {
		return nil, nil, nil
	}
	out := &policy.EndpointSlice{Name: s.Name, Service: policy.ServiceKey{Namespace: s.Namespace, Name: svcName}}
	switch s.AddressType {
	case discoveryv1.AddressTypeIPv4:
		out.IPv4 = true
	case discoveryv1.AddressTypeIPv6:
	default:
		return nil, nil, invalid(obj, "addressType", "unsupported address type %q", s.AddressType)
	}
	var err error
	if out.Ports, err = endpointPorts(obj, s.Ports); err != nil {
		return nil, nil, err
	}
	out.Endpoints = make([]policy.Endpoint, 0, len(s.Endpoints))
	sh := sharing{places: placeSharing{in: in}}
	var bad []error
	var refused refusedEndpoints
	for i := range s.Endpoints {
		ep, err := endpoint(obj, i, &s.Endpoints[i], out.IPv4, &sh)
		if err != nil && !keepValid {
			return nil, nil, err
		}
		if err != nil {
			bad = append(bad, err)
			continue
		}
		// An endpoint on an address no Service may take is left out, the
		// slice's others kept: the API server refuses some of these
		// classes in EndpointSlices, not all (multicast, broadcast).
		if why := policy.AddressRefusal(ep.Address); why != "" {
			refused.add(why, fmt.Sprintf("endpoints[%d].addresses[0]", i), ep.Address)
			continue
		}
		out.Endpoints = append(out.Endpoints, ep)
	}
	out.Warnings = refused.warnings(obj, out.Service)
	return out, bad, nil
}

func endpointPorts(obj string, ports []discoveryv1.EndpointPort) ([]policy.EndpointPort, error) {
	out := make([]policy.EndpointPort, 0, len(ports))
	for i, p := range ports {
		field := fmt.Sprintf("ports[%d]", i)
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		pr, ok := protocol(proto)
		if !ok {
			return nil, invalid(obj, field+".protocol", "unsupported protocol %q", proto)
		}
		if p.Port == nil {
			continue // "all ports": unusable by a port-mapping proxy, as in kube-proxy
		}
		if *p.Port < 1 || *p.Port > 65535 {
			return nil, invalid(obj, field+".port", "must be 1-65535, got %d", *p.Port)
		}
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		out = append(out, policy.EndpointPort{Name: name, Protocol: pr, Port: uint16(*p.Port)})
	}
	return out, nil
}

// sharing is what the endpoints of one slice share: hints, places.
type sharing struct {
	hints  hintSharing
	places placeSharing
}

// placeSharing gives the endpoints of one slice their Places: the
// Interner's when there is one, else the previous endpoint's when equal,
// else a new one.
type placeSharing struct {
	in   *Interner
	last *policy.Place
}

// place returns the Place of an endpoint on node in zone, nil when both
// are nil or empty.
func (ps *placeSharing) place(node, zone *string) *policy.Place {
	var n, z string
	if node != nil {
		n = *node
	}
	if zone != nil {
		z = *zone
	}
	switch {
	case n == "" && z == "":
		return nil
	case ps.in != nil:
		return ps.in.Place(n, z)
	case ps.last != nil && ps.last.NodeName == n && ps.last.Zone == z:
		return ps.last
	}
	ps.last = &policy.Place{NodeName: n, Zone: z}
	return ps.last
}

// hintSharing lets the endpoints of one slice whose hints are one
// object (as Interner.TrimEndpointSlice makes equal hints) share their
// converted hints; the engine never modifies them.
type hintSharing struct {
	seen [4]struct {
		h    *discoveryv1.EndpointHints
		conv *policy.Hints
	}
	n int
}

// convert returns h converted; nil when it names no zone and no node
// (the engine treats that as no hints).
func (hs *hintSharing) convert(h *discoveryv1.EndpointHints) *policy.Hints {
	for _, s := range hs.seen[:hs.n] {
		if s.h == h {
			return s.conv
		}
	}
	var conv *policy.Hints
	if len(h.ForZones) > 0 || len(h.ForNodes) > 0 {
		conv = &policy.Hints{}
		for _, z := range h.ForZones {
			conv.ForZones = append(conv.ForZones, z.Name)
		}
		for _, n := range h.ForNodes {
			conv.ForNodes = append(conv.ForNodes, n.Name)
		}
		conv.ForZones = conv.ForZones[:len(conv.ForZones):len(conv.ForZones)]
		conv.ForNodes = conv.ForNodes[:len(conv.ForNodes):len(conv.ForNodes)]
	}
	if hs.n < len(hs.seen) {
		hs.seen[hs.n].h, hs.seen[hs.n].conv = h, conv
		hs.n++
	}
	return conv
}

func endpoint(obj string, i int, e *discoveryv1.Endpoint, ipv4 bool, sh *sharing) (policy.Endpoint, error) {
	field := fmt.Sprintf("endpoints[%d]", i)
	if len(e.Addresses) == 0 {
		return policy.Endpoint{}, invalid(obj, field+".addresses", "must not be empty")
	}
	// Like kube-proxy, the first address is the endpoint's address.
	a, err := ParseIP(e.Addresses[0])
	if err != nil {
		return policy.Endpoint{}, invalid(obj, field+".addresses[0]", "invalid IP: %v", err)
	}
	if a.Is4() != ipv4 {
		fam := "IPv6"
		if ipv4 {
			fam = "IPv4"
		}
		return policy.Endpoint{}, invalid(obj, field+".addresses[0]", "%s is not an %s address", a, fam)
	}
	ep := policy.Endpoint{Address: a, Ready: true}
	if c := e.Conditions.Ready; c != nil {
		ep.Ready = *c
	}
	ep.Serving = ep.Ready
	if c := e.Conditions.Serving; c != nil {
		ep.Serving = *c
	}
	if c := e.Conditions.Terminating; c != nil {
		ep.Terminating = *c
	}
	ep.Place = sh.places.place(e.NodeName, e.Zone)
	if h := e.Hints; h != nil {
		ep.Hints = sh.hints.convert(h)
	}
	return ep, nil
}

// Node converts n. Only InternalIP and ExternalIP addresses are kept; an
// unparsable one is skipped with a warning, and the rest are kept.
func Node(n *corev1.Node) (*policy.Node, []policy.Warning, error) {
	obj := ObjectName("Node", "", n.Name)
	if n.Name == "" {
		return nil, nil, invalid(obj, "metadata.name", "must not be empty")
	}
	out := &policy.Node{Name: n.Name, Labels: n.Labels}
	var ws []policy.Warning
	for i, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
			continue
		}
		ip, err := ParseIP(a.Address)
		if err != nil {
			// The apiserver accepts any string (a hostname as an
			// ExternalIP): skip this address, keep the rest.
			ws = append(ws, policy.Warning{Object: obj, Field: fmt.Sprintf("status.addresses[%d].address", i),
				Message: fmt.Sprintf("invalid IP: %v; address skipped", err)})
			continue
		}
		if a.Type == corev1.NodeInternalIP {
			out.InternalIPs = append(out.InternalIPs, ip)
		} else {
			out.ExternalIPs = append(out.ExternalIPs, ip)
		}
	}
	return out, ws, nil
}
