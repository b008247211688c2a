package app

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/apiconv"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// snapshot is a set of objects planned at once: the --objects files of
// the dry run, or what the preflight listed from the API server.
type snapshot struct {
	Services       []*corev1.Service
	EndpointSlices []*discoveryv1.EndpointSlice
	Nodes          []*corev1.Node
}

// problemKind says what a snapshot problem did to its object.
type problemKind uint8

const (
	nodeSkipped     problemKind = iota // Err: the Node is not used
	nodeWarning                        // Warning: about a Node, which is used
	notProxied                         // Err: a Service this proxy does not serve (kube-proxy skips it too)
	serviceSkipped                     // Err: an invalid Service, not served
	engineWarning                      // Warning: the engine's, about a Service it serves
	sliceSkipped                       // Err: the EndpointSlice is not used
	endpointLeftOut                    // Err: one endpoint of a slice left out, the others kept
)

// problem is one thing a snapshot's planning reports. Object is the
// object it is about (a *corev1.Node, *corev1.Service or
// *discoveryv1.EndpointSlice), nil for an engine warning about a Service
// the snapshot does not hold.
type problem struct {
	Kind    problemKind
	Object  any
	Err     error
	Warning policy.Warning
}

// snapshotPlan is a snapshot's plan and what the callers report with it.
type snapshotPlan struct {
	Plan policy.Plan
	// LeftOut explains a virtual server of Plan: its endpoints left out.
	LeftOut func(*policy.VirtualServer) []policy.LeftOut
	// Served are the converted Services the engine plans.
	Served map[policy.ServiceKey]*policy.Service
	// NodeFound says a valid Node of the planned node's name was given.
	NodeFound bool
}

// planSnapshot runs the engine over objs as the real mode does: Nodes,
// then Services (one not served still holds its ClusterIPs and keeps its
// endpoints tracked: policy/unmanaged.go; external IPs dropped with
// their warnings while AllowServiceExternalIPs is off), then
// EndpointSlices. It is the one pipeline of the dry run and the
// preflight, so that the two plan alike; report hears every problem, in
// that order.
func planSnapshot(o *Options, objs snapshot, report func(problem)) (snapshotPlan, error) {
	var r snapshotPlan
	engine, err := policy.New(o.engineConfig())
	if err != nil {
		return r, fmt.Errorf("configure engine: %w", err)
	}
	for _, n := range objs.Nodes {
		pn, ws, err := apiconv.Node(n)
		if err != nil {
			report(problem{Kind: nodeSkipped, Object: n, Err: err})
			continue
		}
		r.NodeFound = r.NodeFound || n.Name == o.NodeName
		for _, w := range ws {
			report(problem{Kind: nodeWarning, Object: n, Warning: w})
		}
		engine.UpsertNode(pn)
	}
	objectOf := map[policy.ServiceKey]*corev1.Service{}
	r.Served = map[policy.ServiceKey]*policy.Service{}
	for _, s := range objs.Services {
		ps, err := apiconv.Service(s, o.ServiceProxyName)
		switch {
		case errors.Is(err, policy.ErrNotProxied):
			report(problem{Kind: notProxied, Object: s, Err: err})
		case err != nil:
			report(problem{Kind: serviceSkipped, Object: s, Err: err})
		}
		if err != nil {
			engine.SetUnmanagedService(policy.ServiceKey{Namespace: s.Namespace, Name: s.Name}, apiconv.HeldClusterIPs(s))
			continue
		}
		if !gateOn(o.Config.FeatureGates, gateAllowServiceExternalIPs, true) {
			apiconv.DropExternalIPs(ps)
		}
		objectOf[ps.Key], r.Served[ps.Key] = s, ps
		for _, w := range engine.UpsertService(ps) {
			report(problem{Kind: engineWarning, Object: s, Warning: w})
		}
	}
	for _, s := range objs.EndpointSlices {
		ps, bad, err := apiconv.EndpointSliceKeepValid(s)
		if err != nil {
			report(problem{Kind: sliceSkipped, Object: s, Err: err})
			continue
		}
		for _, b := range bad {
			report(problem{Kind: endpointLeftOut, Object: s, Err: b})
		}
		if ps != nil {
			engine.UpsertEndpointSlice(ps)
		}
	}
	plan, ws := engine.Compute()
	for _, w := range ws {
		p := problem{Kind: engineWarning, Warning: w}
		if s, ok := objectOf[w.Service]; ok {
			p.Object = s
		}
		report(p)
	}
	r.Plan, r.LeftOut = plan, engine.LeftOut
	return r, nil
}
