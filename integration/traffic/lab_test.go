//go:build integration

package traffic

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
	"github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
)

// The standard service ports of the traffic tests: TCP echo and a
// DNS-like UDP echo, backed by every pod's echo servers.
var (
	portHTTP = policy.ServicePort{Name: "http", Protocol: policy.ProtocolTCP, Port: 80}
	portDNS  = policy.ServicePort{Name: "dns", Protocol: policy.ProtocolUDP, Port: 53}
	epPorts  = []policy.EndpointPort{
		{Name: "http", Protocol: policy.ProtocolTCP, Port: podTCPPort},
		{Name: "dns", Protocol: policy.ProtocolUDP, Port: podUDPPort},
	}
)

const (
	nConns        = 30 // connections per count, at least
	labelHostname = "kubernetes.io/hostname"
)

// lab is the harness plus the real data plane, fed by a policy engine
// that sees the harness's nodes: node-a is this node. Its helpers fail
// the test they were created for (l.t): call them from the test's own
// goroutine, never inside t.Run.
type lab struct {
	*harness
	engine *policy.Engine
	dp     *proxier.DataPlane
}

// newLab builds the lab; opts adjust the engine's Config (node-a and
// the cluster CIDRs are set first).
func newLab(t *testing.T, opts ...func(*policy.Config)) *lab {
	t.Helper()
	return newLabWith(t, nil, opts...)
}

// newLabWith is newLab with dpMod adjusting the data plane's config (nil:
// none) before the data plane is made.
func newLabWith(t *testing.T, dpMod func(*proxier.DataPlaneConfig), opts ...func(*policy.Config)) *lab {
	t.Helper()
	h := newHarness(t)
	cidrs := make([]string, len(clusterCIDRs))
	for i, p := range clusterCIDRs {
		cidrs[i] = p.String()
	}
	cfg := policy.Config{NodeName: nodeA, ClusterCIDRs: cidrs}
	for _, o := range opts {
		o(&cfg)
	}
	e, err := policy.New(cfg)
	h.must(err)
	for _, name := range slices.Sorted(maps.Keys(h.nodes)) {
		n := h.nodes[name]
		e.UpsertNode(&policy.Node{Name: name,
			Labels:      map[string]string{policy.LabelTopologyZone: n.zone, labelHostname: name},
			InternalIPs: []netip.Addr{n.v4, n.v6}})
	}
	// The data plane gets the engine's cluster CIDRs, as the proxy's
	// --cluster-cidr feeds both.
	var dpCIDRs []netip.Prefix
	for _, c := range cfg.ClusterCIDRs {
		p, err := netip.ParsePrefix(c)
		h.must(err)
		dpCIDRs = append(dpCIDRs, p)
	}
	dpCfg := proxier.DataPlaneConfig{Interface: "kube-ipvs0", ClusterCIDRs: dpCIDRs, GracefulPeriod: time.Second}
	if dpMod != nil {
		dpMod(&dpCfg)
	}
	dp, err := proxier.NewDataPlane(dpCfg)
	if err != nil {
		t.Fatalf("NewDataPlane: %v", err)
	}
	t.Cleanup(func() {
		if err := dp.Cleanup(); err != nil {
			t.Errorf("data plane Cleanup: %v", err)
		}
		dp.Close()
		checkDataPlaneGone(t)
	})
	return &lab{harness: h, engine: e, dp: dp}
}

// checkDataPlaneGone fails the test if the data plane's Cleanup left IPVS
// virtual servers or the kube-ipvs0 link behind.
func checkDataPlaneGone(t *testing.T) {
	t.Helper()
	ipv, err := ipvs.New("")
	if err != nil {
		t.Errorf("after Cleanup: ipvs handle: %v", err)
		return
	}
	defer ipv.Close()
	if svcs, err := ipv.GetServices(); err != nil || len(svcs) != 0 {
		t.Errorf("after Cleanup: %d IPVS virtual servers left (err %v)", len(svcs), err)
	}
	if _, err := netlink.LinkByName("kube-ipvs0"); err == nil {
		t.Errorf("after Cleanup: kube-ipvs0 still exists")
	}
}

// service returns a ClusterIP service default/<name> with the standard
// ports on the given cluster IPs, modified by mods.
func service(name string, clusterIPs []string, mods ...func(*policy.Service)) *policy.Service {
	s := &policy.Service{Key: policy.ServiceKey{Namespace: "default", Name: name},
		Ports: []policy.ServicePort{portHTTP, portDNS}}
	for _, ip := range clusterIPs {
		s.ClusterIPs = append(s.ClusterIPs, netip.MustParseAddr(ip))
	}
	for _, m := range mods {
		m(s)
	}
	return s
}

func annotate(k, v string) func(*policy.Service) {
	return func(s *policy.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[k] = v
	}
}

// ep is a ready endpoint for a pod's IPv4 address, on the pod's node
// and in that node's zone.
func (l *lab) ep(pod string, mods ...func(*policy.Endpoint)) policy.Endpoint {
	p := l.pod(pod)
	e := policy.Endpoint{Address: p.v4, Ready: true, Serving: true,
		Place: &policy.Place{NodeName: p.node, Zone: l.node(p.node).zone}}
	for _, m := range mods {
		m(&e)
	}
	return e
}

// ep6 is ep for the pod's IPv6 address.
func (l *lab) ep6(pod string, mods ...func(*policy.Endpoint)) policy.Endpoint {
	e := l.ep(pod, mods...)
	e.Address = l.pod(pod).v6
	return e
}

func notReady(e *policy.Endpoint) { e.Ready, e.Serving = false, false }
func forZones(z ...string) func(*policy.Endpoint) {
	return func(e *policy.Endpoint) { hintsOf(e).ForZones = z }
}

func forNodes(n ...string) func(*policy.Endpoint) {
	return func(e *policy.Endpoint) { hintsOf(e).ForNodes = n }
}

// hintsOf returns e's hints, new ones when it has none.
func hintsOf(e *policy.Endpoint) *policy.Hints {
	if e.Hints == nil {
		e.Hints = &policy.Hints{}
	}
	return e.Hints
}

// setService upserts the service and its endpoints, one slice per
// family present, replacing the previous ones.
func (l *lab) setService(s *policy.Service, eps ...policy.Endpoint) {
	l.t.Helper()
	if ws := l.engine.UpsertService(s); len(ws) > 0 {
		l.t.Fatalf("service %s: warnings %v", s.Key, ws)
	}
	l.setEndpoints(s.Key, eps...)
}

// setEndpoints replaces a service's endpoints.
func (l *lab) setEndpoints(key policy.ServiceKey, eps ...policy.Endpoint) {
	l.t.Helper()
	for _, v4 := range []bool{true, false} {
		sl := &policy.EndpointSlice{Name: fmt.Sprintf("%s-v%d", key.Name, map[bool]int{true: 4, false: 6}[v4]),
			Service: key, IPv4: v4, Ports: epPorts}
		for _, e := range eps {
			if e.Address.Is4() == v4 {
				sl.Endpoints = append(sl.Endpoints, e)
			}
		}
		l.engine.UpsertEndpointSlice(sl)
	}
}

// resync computes the whole plan and programs it with a full sync.
func (l *lab) resync() policy.Plan {
	l.t.Helper()
	plan, ws := l.engine.Compute()
	if len(ws) > 0 {
		l.t.Fatalf("plan warnings: %v", ws)
	}
	if err := l.dp.Resync(plan); err != nil {
		l.t.Fatalf("Resync: %v", err)
	}
	return plan
}

// apply recomputes one service and programs it incrementally.
func (l *lab) apply(key policy.ServiceKey) policy.ServicePlan {
	l.t.Helper()
	sp, ok := l.engine.ComputeService(key)
	if !ok {
		l.t.Fatalf("ComputeService %s: unknown service", key)
	}
	before := l.dp.IPVSOps()
	if err := l.dp.Apply([]policy.ServicePlan{sp}); err != nil {
		l.t.Fatalf("Apply %s: %v", key, err)
	}
	l.t.Logf("Apply %s: IPVS ops %v (cumulative before: %v)", key, l.dp.IPVSOps(), before)
	return sp
}

// virtualServer finds the planned virtual server of a service by kind,
// protocol and address family.
func (l *lab) virtualServer(key policy.ServiceKey, kind policy.Kind, proto policy.Protocol, v4 bool) policy.VirtualServer {
	l.t.Helper()
	sp, _ := l.engine.ComputeService(key)
	for _, vs := range sp.VirtualServers {
		if vs.Kind == kind && vs.Protocol == proto && vs.Address.Is4() == v4 {
			return vs
		}
	}
	l.t.Fatalf("no %s %s virtual server for %s", kind, proto, key)
	return policy.VirtualServer{}
}

// expectOnly counts n fresh exchanges from `from` to addr and fails
// unless exactly the allowed backends answered (each at least once).
func (l *lab) expectOnly(t *testing.T, from *host, addr string, proto Proto, n int, allowed ...string) map[string]int {
	t.Helper()
	got, err := l.Count(from, addr, proto, n)
	if err != nil {
		t.Fatalf("%v (answers so far %s)", err, formatCounts(got))
	}
	names := slices.Sorted(maps.Keys(got))
	want := slices.Sorted(slices.Values(allowed))
	if !slices.Equal(names, want) {
		t.Errorf("%s %s from %s over %d connections: answered by %s, want exactly %v", proto, addr, from, n, formatCounts(got), want)
	}
	return got
}

// expectFastFailure fails unless an exchange fails at once (refused or a
// fatal ICMP error), not by timing out.
func (l *lab) expectFastFailure(t *testing.T, from *host, proto Proto, addr string) {
	t.Helper()
	name, _, err := l.Exchange(from, proto, addr, l.timeout)
	switch {
	case err == nil:
		t.Errorf("%s %s from %s: answered by %s, want a refusal", proto, addr, from, name)
	case !labnet.IsFastFailure(err):
		t.Errorf("%s %s from %s: %v, want a refusal (connection refused or ICMP unreachable)", proto, addr, from, err)
	}
}

// expectDrop fails unless an exchange times out: nothing came back.
func (l *lab) expectDrop(t *testing.T, from *host, proto Proto, addr string) {
	t.Helper()
	name, _, err := l.Exchange(from, proto, addr, l.dropFor)
	switch {
	case err == nil:
		t.Errorf("%s %s from %s: answered by %s, want a drop", proto, addr, from, name)
	case !labnet.IsTimeout(err):
		t.Errorf("%s %s from %s: %v, want a drop (timeout)", proto, addr, from, err)
	}
}
