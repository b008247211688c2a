package policy

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// equateAddr lets cmp compare plans: netip.Addr is comparable with ==.
var equateAddr = cmp.Options{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b }),
}

const (
	thisNode = "node-a"
	thisZone = "zone-a"
)

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

type epOpt func(*Endpoint)

// ep is a ready endpoint on another node in another zone unless opts say
// otherwise.
func ep(addr string, opts ...epOpt) Endpoint {
	e := Endpoint{Address: ip(addr), Ready: true, Serving: true, Place: at("node-x", "zone-x")}
	for _, o := range opts {
		o(&e)
	}
	return e
}

func on(node, zone string) epOpt { return func(e *Endpoint) { e.Place = at(node, zone) } }
func local() epOpt               { return on(thisNode, thisZone) }
func zones(z ...string) epOpt    { return func(e *Endpoint) { hintsOf(e).ForZones = z } }
func nodes(n ...string) epOpt    { return func(e *Endpoint) { hintsOf(e).ForNodes = n } }

// at is the Place of an endpoint on node in zone; nil for neither, as
// apiconv converts it.
func at(node, zone string) *Place {
	if node == "" && zone == "" {
		return nil
	}
	return &Place{NodeName: node, Zone: zone}
}

// hintsOf returns e's hints, new ones when it has none.
func hintsOf(e *Endpoint) *Hints {
	if e.Hints == nil {
		e.Hints = &Hints{}
	}
	return e.Hints
}
func notReady(e *Endpoint)        { e.Ready, e.Serving, e.Terminating = false, false, false }
func terminating(e *Endpoint)     { e.Ready, e.Serving, e.Terminating = false, true, true }
func terminatingDead(e *Endpoint) { e.Ready, e.Serving, e.Terminating = false, false, true }

type svcOpt func(*Service)

// svc is a ClusterIP service default/NAME on 10.96.0.1, port http TCP 80.
func svc(name string, opts ...svcOpt) *Service {
	s := &Service{
		Key:        ServiceKey{"default", name},
		ClusterIPs: []netip.Addr{ip("10.96.0.1")},
		Ports:      []ServicePort{{Name: "http", Protocol: ProtocolTCP, Port: 80}},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func annotate(kv ...string) svcOpt {
	return func(s *Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			s.Annotations[kv[i]] = kv[i+1]
		}
	}
}

func internalLocal(s *Service) { s.InternalLocal = true }

// slice is an IPv4 slice of default/SERVICE with port http TCP 8080.
func slice(service, name string, eps ...Endpoint) *EndpointSlice {
	return &EndpointSlice{
		Name: name, Service: ServiceKey{"default", service}, IPv4: true,
		Ports:     []EndpointPort{{Name: "http", Protocol: ProtocolTCP, Port: 8080}},
		Endpoints: eps,
	}
}

func node(name, zone string, addrs ...string) *Node {
	n := &Node{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}
	if zone != "" {
		n.Labels[LabelTopologyZone] = zone
	}
	for _, a := range addrs {
		n.InternalIPs = append(n.InternalIPs, ip(a))
	}
	return n
}

// world is the input of one engine test.
type world struct {
	cfg    Config
	nodes  []*Node
	svcs   []*Service
	slices []*EndpointSlice
}

// newEngine loads w. Without nodes, this node exists in thisZone.
func newEngine(t testing.TB, w world) (*Engine, []Warning) {
	t.Helper()
	if w.cfg.NodeName == "" {
		w.cfg.NodeName = thisNode
	}
	e, err := New(w.cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if w.nodes == nil {
		w.nodes = []*Node{node(thisNode, thisZone, "192.168.0.1")}
	}
	for _, n := range w.nodes {
		e.UpsertNode(n)
	}
	var ws []Warning
	for _, s := range w.svcs {
		ws = append(ws, e.UpsertService(s)...)
	}
	for _, s := range w.slices {
		e.UpsertEndpointSlice(s)
	}
	return e, ws
}

// vsOf returns the only virtual server of the given kind.
func vsOf(t testing.TB, p Plan, k Kind) VirtualServer {
	t.Helper()
	var found []VirtualServer
	for _, vs := range p.VirtualServers {
		if vs.Kind == k {
			found = append(found, vs)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s virtual server, got %d: %+v", k, len(found), p.VirtualServers)
	}
	return found[0]
}

// dests renders destinations as "addr:port" or, with weights != 1,
// "addr:port=w", space separated.
func dests(ds []Destination) string {
	var parts []string
	for _, d := range ds {
		s := netip.AddrPortFrom(d.Address, d.Port).String()
		if d.Weight != 1 {
			s += fmt.Sprintf("=%d", d.Weight)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func warningsText(ws []Warning) string {
	var parts []string
	for _, w := range ws {
		parts = append(parts, w.String())
	}
	return strings.Join(parts, "\n")
}
