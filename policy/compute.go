package policy

import (
	"net/netip"
	"slices"
)

// virtualServers assembles one service's virtual servers, sorted, and
// counts its local ready endpoints. For each family the service has a
// cluster IP of, and each port, it gathers the endpoints once and lets
// each kind of virtual server pick its selection.
func (e *Engine) virtualServers(entry *serviceEntry) ([]VirtualServer, int) {
	svc, st := entry.svc, entry.settings
	var out []VirtualServer
	var localReady []netip.Addr
	zone := e.selfLabel(LabelTopologyZone)
	var buf [maxFrontends]frontend
	for ci, cip := range svc.ClusterIPs {
		v4 := cip.Is4()
		for _, sp := range svc.Ports {
			cands := candidates(e.slices[svc.Key], sp, v4, e.cfg.NodeName)
			for i := range cands {
				if cands[i].local && cands[i].Ready {
					localReady = append(localReady, cands[i].Address)
				}
			}
			b := vsBuilder{svc: svc, st: st, port: sp, v4: v4, clusterIP: cip, anyUsable: anyUsable(cands),
				clusterMasquerade: e.clusterMasquerade(v4)}
			b.nodeIP, _ = e.primaryIP(v4)

			var internal selection
			switch {
			case svc.InternalLocal:
				b.internalPolicy, internal = PolicyLocal, prefixed("iTP=Local; ", localSelection(cands))
			case st.tiering != "":
				b.internalPolicy, internal = st.tiering, tieredSelection(cands, e.tiering(st), st.factor)
			default:
				b.internalPolicy, internal = PolicyCluster, prefixed("iTP=Cluster; ", clusterSelection(cands, e.cfg.NodeName, zone))
			}
			var external selection
			externalDone := false
			for _, fe := range e.frontends(buf[:0], svc, sp, ci) {
				if !fe.kind.External() {
					out = b.add(out, fe, internal)
					continue
				}
				if !externalDone {
					externalDone = true
					if svc.ExternalLocal {
						b.externalPolicy, external = PolicyLocal, prefixed("eTP=Local; ", localSelection(cands))
					} else {
						b.externalPolicy, external = PolicyCluster, prefixed("eTP=Cluster; ", clusterSelection(cands, e.cfg.NodeName, zone))
					}
				}
				out = b.add(out, fe, external)
			}
		}
	}
	SortVirtualServers(out)
	// Like kube-proxy's LocalReadyEndpoints: unique addresses across the
	// service's ports and families.
	slices.SortFunc(localReady, netip.Addr.Compare)
	return out, len(slices.Compact(localReady))
}

// anyUsable is kube-proxy's hasAnyEndpoints: some endpoint is ready, or
// serving and terminating.
func anyUsable(cands []candidate) bool {
	for i := range cands {
		if cands[i].Ready || cands[i].Serving && cands[i].Terminating {
			return true
		}
	}
	return false
}

// clusterMasquerade is the masquerade mode of ClusterIP virtual servers
// of one family. NOTRACK does not change it: NOTRACK applies only to
// pods' traffic, and the host's and external clients' traffic that is
// masqueraded stays tracked.
func (e *Engine) clusterMasquerade(v4 bool) Masquerade {
	switch {
	case e.cfg.MasqueradeAll:
		return MasqueradeAlways
	case e.cfg.LocalByInterface, v4 && e.clusterCIDR4, !v4 && e.clusterCIDR6:
		return MasqueradeOffCluster
	}
	return MasqueradeNever
}

func prefixed(prefix string, s selection) selection {
	s.reason = prefix + s.reason
	return s
}

// tiering builds the service's tier order.
func (e *Engine) tiering(st settings) tiering {
	switch st.tiering {
	case PolicyPreferLocal:
		return preferLocal(e.cfg.NodeName, e.selfLabel(LabelTopologyZone))
	case PolicyPreferZone:
		return preferZone(e.selfLabel(LabelTopologyZone))
	}
	var self map[string]string
	if e.self != nil {
		self = e.self.Labels
	}
	return topologyKeys(st.keys, self, func(name string) map[string]string { return e.nodeLabels[name] })
}

func (e *Engine) selfLabel(key string) string {
	if e.self == nil {
		return ""
	}
	return e.self.Labels[key]
}

// vsBuilder stamps out the virtual servers of one service port.
type vsBuilder struct {
	svc                            *Service
	st                             settings
	port                           ServicePort
	v4                             bool       // the family being built
	clusterIP                      netip.Addr // the service's ClusterIP of that family
	internalPolicy, externalPolicy TrafficPolicy
	anyUsable                      bool       // the port has a usable endpoint somewhere
	clusterMasquerade              Masquerade // for the ClusterIP kind
	nodeIP                         netip.Addr // this node's primary IP of the family, if known
}

// add appends a virtual server for every address of a frontend, which
// are of the family being built.
func (b *vsBuilder) add(out []VirtualServer, fe frontend, sel selection) []VirtualServer {
	k := fe.kind
	sched, note := b.scheduler(sel.dests)
	port, policy, masq := fe.port, b.internalPolicy, b.clusterMasquerade
	if k.External() {
		policy, masq = b.externalPolicy, MasqueradeAlways
		if policy == PolicyLocal {
			masq = MasqueradeNever
		}
	}
	var whenEmpty EmptyAction
	if len(sel.dests) == 0 {
		whenEmpty = EmptyReject
		if policy == PolicyLocal && b.anyUsable {
			whenEmpty = EmptyDrop
		}
	}
	var ranges []netip.Prefix
	nodeInRanges := false
	if k == KindLoadBalancer {
		ranges = b.sourceRanges()
		nodeInRanges = b.nodeIP.IsValid() && slices.ContainsFunc(ranges, func(p netip.Prefix) bool { return p.Contains(b.nodeIP) })
	}
	reason := sel.reason + note
	if fe.onNode {
		reason += "; on a node address, not bound"
	}
	var via netip.AddrPort
	if k.External() && policy == PolicyLocal && len(ranges) == 0 {
		via = netip.AddrPortFrom(b.clusterIP, b.port.Port)
		reason += "; in-cluster clients via " + via.String()
	}
	for _, a := range fe.addrs {
		out = append(out, VirtualServer{
			Service: b.svc.Key, PortName: b.port.Name, Kind: k,
			Address: a, Port: port, Protocol: b.port.Protocol,
			Scheduler: sched, SchedulerFlags: b.st.flags,
			PersistenceTimeoutSeconds: b.svc.PersistenceTimeoutSeconds,
			TrafficPolicy:             policy, NoTrack: b.st.noTrack,
			Masquerade: masq, WhenEmpty: whenEmpty, InternalVia: via, SourceRanges: ranges,
			NodeInSourceRanges: nodeInRanges, OnNodeAddress: fe.onNode, Destinations: nonNil(sel.dests), Reason: reason,
		})
	}
	return out
}

// sourceRanges are the service's loadBalancerSourceRanges of the family
// being built. As in kube-proxy, when none is of this family, any source
// is allowed.
func (b *vsBuilder) sourceRanges() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range b.svc.LoadBalancerSourceRanges {
		if p.Addr().Is4() == b.v4 {
			out = append(out, p)
		}
	}
	return out
}

// scheduler applies the rule that rr and lc become wrr and wlc when the
// destination weights are unequal, since rr and lc ignore weights.
func (b *vsBuilder) scheduler(dests []Destination) (string, string) {
	s := b.st.scheduler
	equal := !slices.ContainsFunc(dests, func(d Destination) bool { return d.Weight != dests[0].Weight })
	switch {
	case equal:
		return s, ""
	case s == "rr":
		return "wrr", "; scheduler rr→wrr for unequal weights"
	case s == "lc":
		return "wlc", "; scheduler lc→wlc for unequal weights"
	}
	return s, ""
}

func nonNil(d []Destination) []Destination {
	if d == nil {
		return []Destination{}
	}
	return d
}
