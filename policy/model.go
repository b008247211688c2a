package policy

import (
	"cmp"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// The engine's inputs: validated, plain values built from the Kubernetes
// API objects by package apiconv. The engine trusts their syntax (parsed
// addresses, known protocols) but not their consistency.

// ServiceKey identifies a Service.
type ServiceKey struct{ Namespace, Name string }

func (k ServiceKey) String() string { return k.Namespace + "/" + k.Name }

// Compare orders service keys by namespace, then name: the one order of
// services everywhere (plans, writers, health checks, events).
func (k ServiceKey) Compare(o ServiceKey) int {
	return cmp.Or(cmp.Compare(k.Namespace, o.Namespace), cmp.Compare(k.Name, o.Name))
}

// MarshalText renders the key as namespace/name, its form in the plan's
// JSON (--dry-run) and in logs.
func (k ServiceKey) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a key back from namespace/name.
func (k *ServiceKey) UnmarshalText(b []byte) error {
	ns, name, ok := strings.Cut(string(b), "/")
	if !ok || ns == "" || name == "" {
		return fmt.Errorf("service key %q: want namespace/name", b)
	}
	*k = ServiceKey{Namespace: ns, Name: name}
	return nil
}

// Service is a proxied Service.
type Service struct {
	Key ServiceKey
	// Created is metadata.creationTimestamp: among services claiming one
	// virtual server, the oldest wins (see Engine's ownership rule).
	Created time.Time
	// ClusterIPs holds at most one address per family. The service is
	// served only in the families it has a cluster IP of.
	ClusterIPs []netip.Addr
	// ExternalIPs and LoadBalancerIPs (the ingress IPs whose ipMode is
	// not Proxy) are distinct and canonical: no address twice, in one
	// list or across both, and none no Service may take
	// (AddressRefusal). Package apiconv normalises them so; the engine
	// refuses those addresses again, as a guard, but does not look for
	// duplicates.
	ExternalIPs     []netip.Addr
	LoadBalancerIPs []netip.Addr
	Ports           []ServicePort
	// InternalLocal is internalTrafficPolicy Local.
	InternalLocal bool
	// ExternalLocal is externalTrafficPolicy Local on an externally
	// accessible service: NodePort, LoadBalancer, or ClusterIP with
	// external IPs (kube-proxy's rule).
	ExternalLocal bool
	// LoadBalancerSourceRanges restricts LoadBalancer clients; empty means
	// any.
	LoadBalancerSourceRanges []netip.Prefix
	// HealthCheckNodePort is spec.healthCheckNodePort (eTP=Local
	// LoadBalancers), or 0.
	HealthCheckNodePort uint16
	// PersistenceTimeoutSeconds is the ClientIP affinity timeout, or 0.
	PersistenceTimeoutSeconds uint32
	// Annotations are the Service's annotations; the engine reads the
	// kube-ipvs-proxy.io ones.
	Annotations map[string]string
	// Warnings are what converting the Service worked around (an
	// address left out, and why); each has a Reason and names the
	// Service, and comes back with every plan of it.
	Warnings []Warning
}

// ServicePort is one port of a Service.
type ServicePort struct {
	Name     string
	Protocol Protocol
	Port     uint16
	NodePort uint16 // 0 when none is allocated
}

// EndpointSlice is an IPv4 or IPv6 EndpointSlice of a Service.
type EndpointSlice struct {
	Name      string // slice name; decides ties between duplicate endpoints
	Service   ServiceKey
	IPv4      bool
	Ports     []EndpointPort
	Endpoints []Endpoint
	// Warnings are what converting the slice worked around (endpoints
	// left out, one warning per reason); each has a Reason and names
	// the slice's Service, and comes back with its plans.
	Warnings []Warning
}

// EndpointPort is a named port of an EndpointSlice.
type EndpointPort struct {
	Name     string
	Protocol Protocol
	Port     uint16
}

// Endpoint is one endpoint with the API's defaults applied: ready nil is
// true, serving nil is ready, terminating nil is false.
type Endpoint struct {
	Address     netip.Addr
	Ready       bool
	Serving     bool
	Terminating bool
	// Place is the endpoint's node and zone, nil when it has neither.
	// Endpoints on the same node and zone may share one Place: the
	// engine never modifies it. A pointer, not two strings, because the
	// endpoints of a cluster run on a few nodes in a few zones while
	// there are many endpoints (benchmarks/NOTES.md, memory).
	Place *Place
	// Hints are the endpoint's topology hints, nil when it has none.
	// Endpoints with equal hints may share one Hints: the engine never
	// modifies them. A pointer, not two slices, because most endpoints
	// have none (benchmarks/NOTES.md, memory).
	Hints *Hints
}

// Place is where an endpoint runs: its node and its zone ("" when
// unknown). Endpoints on the same node and zone may share one Place; the
// engine never modifies it.
type Place struct{ NodeName, Zone string }

// NodeName returns the node the endpoint runs on; "" without a Place.
func (e *Endpoint) NodeName() string {
	if e.Place == nil {
		return ""
	}
	return e.Place.NodeName
}

// Zone returns the zone the endpoint runs in; "" without a Place.
func (e *Endpoint) Zone() string {
	if e.Place == nil {
		return ""
	}
	return e.Place.Zone
}

// Hints are an endpoint's topology hints: the zones and the nodes it
// is meant for (EndpointSlice hints.forZones, hints.forNodes).
type Hints struct {
	ForZones []string
	ForNodes []string
}

// ForZones returns the zones the endpoint's hints name; none without hints.
func (e *Endpoint) ForZones() []string {
	if e.Hints == nil {
		return nil
	}
	return e.Hints.ForZones
}

// ForNodes returns the nodes the endpoint's hints name; none without hints.
func (e *Endpoint) ForNodes() []string {
	if e.Hints == nil {
		return nil
	}
	return e.Hints.ForNodes
}

// Node is what the engine needs of a Node: this node's labels and
// addresses, and other nodes' labels for topology keys.
type Node struct {
	Name        string
	Labels      map[string]string
	InternalIPs []netip.Addr
	ExternalIPs []netip.Addr
}

// Well-known labels read by the engine.
const (
	LabelTopologyZone = "topology.kubernetes.io/zone"
)
