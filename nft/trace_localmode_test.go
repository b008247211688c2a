package nft_test

import (
	"net/netip"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft/internal/packettrace"
)

// localMode is one of kube-proxy's ways of telling this node's pods
// (detectLocalMode), with the node's routes as its CNI sets them up.
type localMode struct {
	name         string
	podInterface string // nft.Config.PodInterface
	prefix       bool
	// podRoutes are the routes to this node's pods (pod-a, pod-b), by
	// family; every other address is reached by eth0.
	podRoutes func(t testing.TB, fam int) []packettrace.Route
	// differs are the cases of cases whose verdict differs in this mode,
	// by name, with the mode's verdict; extra are the mode's own.
	differs map[string]traceCase
	extra   []traceCase
}

// routes are the node's routes in both families.
func (m localMode) routes(t testing.TB) []packettrace.Route {
	rs := []packettrace.Route{
		{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Dev: "eth0"},
		{Prefix: netip.MustParsePrefix("::/0"), Dev: "eth0"},
	}
	for fam := range 2 {
		if m.podRoutes != nil {
			rs = append(rs, m.podRoutes(t, fam)...)
		}
	}
	return rs
}

// bridgeRoutes: the pods' subnet is on the bridge cni0 (the CNI bridge
// plugin, kubenet's cbr0).
func bridgeRoutes(t testing.TB, fam int) []packettrace.Route {
	bits := [2]int{24, 64}[fam]
	return []packettrace.Route{{Prefix: netip.PrefixFrom(addr(t, "bridge", fam), bits).Masked(), Dev: "cni0"}}
}

// vethRoutes: each pod has a host route to its own veth (Calico's
// cali*, here veth*).
func vethRoutes(t testing.TB, fam int) []packettrace.Route {
	var rs []packettrace.Route
	for pod, dev := range map[string]string{"pod-a": "veth1a", "pod-b": "veth2b"} {
		a := addr(t, pod, fam)
		rs = append(rs, packettrace.Route{Prefix: netip.PrefixFrom(a, a.BitLen()), Dev: dev})
	}
	return rs
}

// localPodToNoTrackDest is the notrack-endpoints request rule in the
// interface modes: only a pod of this node is untracked to a NOTRACK
// destination it reaches directly.
var localPodToNoTrackDest = traceCase{name: "iifname: a local pod's packet straight to a NOTRACK destination is untracked",
	src: "pod-b", dst: "pod-c:5353", proto: packettrace.UDP, want: "send notrack", proves: []string{"raw-prerouting#2"}}

// In the interface modes a pod of another node is not local, whatever
// its address: it comes in on eth0. These cases of the address mode
// change with that, the same way in both interface modes.
var remotePodIsNotLocal = map[string]traceCase{
	"cluster-cidrs: the last address of a cluster CIDR is a pod (not masqueraded)": {
		want: "send masq=mark dnat=ipvs>pod-c:8080", proves: []string{"nat-prerouting#2"}},
	"notrack-endpoints: a pod's packet to a NOTRACK destination (sent by another node's IPVS) is untracked": {
		want: "send", proves: []string{"!raw-prerouting#2"}},
	"notrack-endpoints: a pod's packet to a host-network NOTRACK destination is untracked and delivered": {
		want: "deliver", proves: []string{"!raw-prerouting#2"}},
}

var (
	byClusterCIDR = localMode{name: "ClusterCIDR"}
	byBridge      = localMode{name: "BridgeInterface", podInterface: "cni0", podRoutes: bridgeRoutes, differs: remotePodIsNotLocal,
		extra: []traceCase{localPodToNoTrackDest,
			{name: "iifname: a client on the bridge is a local pod whatever its address (not masqueraded)", src: "client", iif: "cni0", dst: "web:80", backend: "pod-c",
				want: "send dnat=ipvs>pod-c:8080", proves: []string{"!nat-prerouting#2"}},
			{name: "iifname: a pod address coming in on eth0 is not a local pod (masqueraded)", src: "pod-b", iif: "eth0", dst: "web:80", backend: "pod-c",
				want: "send masq=mark dnat=ipvs>pod-c:8080", proves: []string{"nat-prerouting#2"}},
			{name: "iifname: the bridge's name is matched whole (cni01 is another interface)", src: "pod-b", iif: "cni01", dst: "web:80", backend: "pod-c",
				want: "send masq=mark dnat=ipvs>pod-c:8080", proves: []string{"nat-prerouting#2"}},
			{name: "iifname: a client on the bridge is short-circuited to an eTP=Local service's ClusterIP", src: "client", iif: "cni0", dst: "localep-lb:80", backend: "pod-c",
				want: "send dnat=nat-prerouting#3>localep:80,ipvs>pod-c:8080", proves: []string{"nat-prerouting#3"}},
			{name: "iifname: a pod address on eth0 is an external client of an eTP=Local service", src: "pod-d", dst: "localep-lb:80",
				want: "send dnat=ipvs>pod-a:8080", proves: []string{"!nat-prerouting#3"}},
			{name: "iifname: a client on the bridge is untracked to a NOTRACK service", src: "client", iif: "cni0", dst: "dns:53", proto: packettrace.UDP, backend: "pod-c",
				want: "send notrack dnat=ipvs>pod-c:5353", proves: []string{"raw-prerouting#1"}},
			{name: "fib daddr oifname: a NOTRACK destination's reply to a remote pod (routed out of eth0) stays tracked", src: "pod-a:5353", dst: "pod-d:40000", proto: packettrace.UDP, state: packettrace.StateEstablished,
				want: "send", proves: []string{"!raw-prerouting#3"}},
		}}
	byPrefix = localMode{name: "InterfaceNamePrefix", podInterface: "veth", prefix: true, podRoutes: vethRoutes, differs: remotePodIsNotLocal,
		extra: []traceCase{localPodToNoTrackDest,
			{name: "iifname prefix: any interface named veth* is a local pod (not masqueraded)", src: "client", iif: "veth9z", dst: "web:80", backend: "pod-c",
				want: "send dnat=ipvs>pod-c:8080", proves: []string{"!nat-prerouting#2"}},
			{name: "iifname prefix: the prefix alone is a name it matches", src: "client", iif: "veth", dst: "web:80", backend: "pod-c",
				want: "send dnat=ipvs>pod-c:8080", proves: []string{"!nat-prerouting#2"}},
			{name: "iifname prefix: a name holding the prefix later does not match (masqueraded)", src: "pod-b", iif: "xveth2b", dst: "web:80", backend: "pod-c",
				want: "send masq=mark dnat=ipvs>pod-c:8080", proves: []string{"nat-prerouting#2"}},
			{name: "iifname prefix: the bridge is not a pod interface (masqueraded)", src: "pod-b", iif: "cni0", dst: "web:80", backend: "pod-c",
				want: "send masq=mark dnat=ipvs>pod-c:8080", proves: []string{"nat-prerouting#2"}},
			{name: "iifname prefix: a pod on its veth is short-circuited to an eTP=Local service's ClusterIP", src: "pod-b", dst: "node:30030",
				want: "send dnat=nat-prerouting#3>local:80,ipvs>pod-c:8080", proves: []string{"nat-prerouting#3"}},
			{name: "oifname prefix: a host-network NOTRACK destination's reply to a pod on its veth is untracked", host: true, src: "node:5353", dst: "pod-b:40000", proto: packettrace.UDP, state: packettrace.StateEstablished,
				want: "send notrack", proves: []string{"raw-output#1"}},
			{name: "oifname prefix: the host's reply to a remote pod stays tracked", host: true, src: "node:5353", dst: "pod-d:40000", proto: packettrace.UDP, state: packettrace.StateEstablished,
				want: "send", proves: []string{"!raw-output#1"}},
		}}
	localModes = []localMode{byClusterCIDR, byBridge, byPrefix}
)

// TestTraceInEachLocalMode runs the table of cases with the pods told by
// interface, as kube-proxy's BridgeInterface and InterfaceNamePrefix,
// each with the routes its CNI makes: the same verdicts, but for a remote
// pod (no longer local) and the mode's own cases.
func TestTraceInEachLocalMode(t *testing.T) {
	for _, m := range localModes[1:] {
		tr := newTracerFor(t, m)
		for fam := range 2 {
			for _, tc := range cases {
				if d, ok := m.differs[tc.name]; ok {
					tc.want, tc.proves = d.want, d.proves
				}
				t.Run(m.name+"/"+famName(fam)+"/"+tc.name, func(t *testing.T) { tc.check(t, tr, fam) })
			}
			for _, tc := range m.extra {
				t.Run(m.name+"/"+famName(fam)+"/"+tc.name, func(t *testing.T) { tc.check(t, tr, fam) })
			}
		}
		for name := range m.differs {
			if !hasCase(name) {
				t.Errorf("%s: differs names %q, no case of the table", m.name, name)
			}
		}
	}
}

func hasCase(name string) bool {
	for _, tc := range cases {
		if tc.name == name {
			return true
		}
	}
	return false
}

// TestEveryRuleIsMatchedInEachLocalMode: the cases, with each mode's
// own, match every rule of the table in every mode, the rules whose
// local-pod match changed among them.
func TestEveryRuleIsMatchedInEachLocalMode(t *testing.T) {
	for _, m := range localModes[1:] {
		tr := newTracerFor(t, m)
		for fam := range 2 {
			for _, tc := range append(append([]traceCase{}, cases...), m.extra...) {
				if _, err := tc.trace(t, tr, fam); err != nil {
					t.Fatalf("%s: %s: %v", m.name, tc.name, err)
				}
			}
		}
		for _, r := range tr.Uncovered() {
			t.Errorf("%s: rule %s is matched by no case", m.name, r)
		}
	}
}
