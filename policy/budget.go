package policy

import (
	"fmt"
	"slices"
)

// The per-service budget. A Service's virtual servers are its ports times
// its addresses (ClusterIPs, external and load-balancer IPs); an editor
// can ask for millions (1,000 ports × 10,000 external IPs), and every
// node would build them. A service over Config.MaxVirtualServers is not
// served at all and gets one warning saying why and the limit. The count
// is arithmetic on the spec, made before anything is expanded, so such a
// service costs the engine no more than its object. NodePort virtual
// servers are not counted against it: each node port is allocated by the
// API server from its range, so a tenant cannot multiply them, and
// counting the node's addresses would admit a Service on one node and
// refuse it on another (and so one warning per node, not one per
// cluster). The node-wide ceiling, which is about this node's memory,
// counts them.

// virtualServerCount is the number of virtual servers svc asks for on
// its own addresses, before ownership: per family of its ClusterIPs,
// every port on the ClusterIP and the external and load-balancer IPs of
// the family.
func (e *Engine) virtualServerCount(svc *Service) int {
	n := 0
	for _, cip := range svc.ClusterIPs {
		v4 := cip.Is4()
		addrs := 1 + countFamily(svc.ExternalIPs, v4) + countFamily(svc.LoadBalancerIPs, v4)
		n += len(svc.Ports) * addrs
	}
	return n
}

func countFamily[T interface{ Is4() bool }](addrs []T, v4 bool) int {
	n := 0
	for _, a := range addrs {
		if a.Is4() == v4 {
			n++
		}
	}
	return n
}

// overBudget reports whether svc asks for more virtual servers than
// Config.MaxVirtualServers (0: no limit), with the warning that says so.
func (e *Engine) overBudget(svc *Service) (Warning, bool) {
	limit := e.cfg.MaxVirtualServers
	if limit <= 0 {
		return Warning{}, false
	}
	n := e.virtualServerCount(svc)
	if n <= limit {
		return Warning{}, false
	}
	return Warning{Object: "Service " + svc.Key.String(), Field: "spec", Reason: ReasonTooManyVirtualServers, Service: svc.Key,
		Message: fmt.Sprintf("%d ports on %d ClusterIPs, %d external and %d load-balancer IPs make %d virtual servers, over the limit of %d per Service (--max-virtual-servers-per-service, maxVirtualServersPerService); not served",
			len(svc.Ports), len(svc.ClusterIPs), len(svc.ExternalIPs), len(svc.LoadBalancerIPs), n, limit)}, true
}

// nodeVirtualServerCount is the number of virtual servers svc asks for on
// this node, before ownership: virtualServerCount and, per family of its
// ClusterIPs, every port with a node port on each of this node's
// NodePort addresses of the family. Still arithmetic on the spec.
func (e *Engine) nodeVirtualServerCount(svc *Service) int {
	n := e.virtualServerCount(svc)
	withNodePort := 0
	for _, sp := range svc.Ports {
		if sp.NodePort != 0 {
			withNodePort++
		}
	}
	if withNodePort == 0 {
		return n
	}
	for _, cip := range svc.ClusterIPs {
		n += withNodePort * countFamily(e.nodeIPs, cip.Is4())
	}
	return n
}

// The node-wide ceiling (Config.MaxVirtualServersPerNode) counts every
// virtual server of this node, NodePorts included
// (nodeVirtualServerCount): services are admitted oldest first
// (creationTimestamp, then namespace/name), each if its virtual servers
// fit under the ceiling with those of the older services admitted; a service that does not fit is refused with one
// warning, and younger, smaller ones may still fit. A new Service can
// thus never push an older one out. The admission is recomputed, in
// O(services log services), on each Service change and node address
// change, only when a ceiling is set.

// applyCeiling recomputes the refused services and returns those whose
// admission changed.
func (e *Engine) applyCeiling() []ServiceKey {
	limit := e.cfg.MaxVirtualServersPerNode
	if limit <= 0 {
		return nil
	}
	entries := make([]*serviceEntry, 0, len(e.services))
	for _, entry := range e.services {
		entries = append(entries, entry)
	}
	slices.SortFunc(entries, func(a, b *serviceEntry) int {
		if c := a.svc.Created.Compare(b.svc.Created); c != 0 {
			return c
		}
		return a.svc.Key.Compare(b.svc.Key)
	})
	refused := map[ServiceKey]int{}
	total := 0
	for _, entry := range entries {
		if _, over := e.overBudget(entry.svc); over {
			continue // refused on its own
		}
		n := e.nodeVirtualServerCount(entry.svc)
		if total+n > limit {
			refused[entry.svc.Key] = total
			continue
		}
		total += n
	}
	var flipped []ServiceKey
	for k := range refused {
		if _, was := e.ceilingRefused[k]; !was {
			flipped = append(flipped, k)
		}
	}
	for k := range e.ceilingRefused {
		if _, is := refused[k]; !is {
			if _, exists := e.services[k]; exists {
				flipped = append(flipped, k)
			}
		}
	}
	e.ceilingRefused = refused
	return flipped
}

// overCeiling reports whether the node-wide ceiling refuses svc, with the
// warning that says so.
func (e *Engine) overCeiling(svc *Service) (Warning, bool) {
	older, refused := e.ceilingRefused[svc.Key]
	if !refused {
		return Warning{}, false
	}
	return Warning{Object: "Service " + svc.Key.String(), Field: "spec", Reason: ReasonTooManyVirtualServers, Service: svc.Key,
		Message: fmt.Sprintf("its %d virtual servers (NodePorts included) do not fit under this node's ceiling of %d (--max-virtual-servers-per-node, maxVirtualServersPerNode), %d taken by older Services; not served",
			e.nodeVirtualServerCount(svc), e.cfg.MaxVirtualServersPerNode, older)}, true
}

func (e *Engine) isCeilingRefused(k ServiceKey) bool {
	_, refused := e.ceilingRefused[k]
	return refused
}
