package policy

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// vsLine renders a virtual server as "KIND ADDR:PORT/PROTO -> dests".
func vsLine(vs VirtualServer) string {
	return string(vs.Kind) + " " + netip.AddrPortFrom(vs.Address, vs.Port).String() + "/" + string(vs.Protocol) + " -> " + dests(vs.Destinations)
}

func planLines(p Plan) []string {
	var out []string
	for _, vs := range p.VirtualServers {
		out = append(out, vsLine(vs))
	}
	return out
}

func TestVirtualServers(t *testing.T) {
	v6slice := func(eps ...Endpoint) *EndpointSlice {
		s := slice("web", "web-v6", eps...)
		s.IPv4 = false
		return s
	}
	tests := []struct {
		name   string
		cfg    Config
		nodes  []*Node
		svc    *Service
		slices []*EndpointSlice
		want   []string
	}{
		{
			name:   "a service without endpoints still has its virtual server",
			svc:    svc("web"),
			want:   []string{"ClusterIP 10.96.0.1:80/TCP -> "},
			slices: nil,
		},
		{
			name: "every kind: ClusterIP, NodePort per node address, ExternalIP, LoadBalancer",
			svc: svc("web", func(s *Service) {
				s.Ports[0].NodePort = 30080
				s.ExternalIPs = []netip.Addr{ip("203.0.113.7")}
				s.LoadBalancerIPs = []netip.Addr{ip("198.51.100.9")}
			}),
			nodes:  []*Node{node(thisNode, thisZone, "192.168.0.1", "192.168.1.1")},
			slices: []*EndpointSlice{slice("web", "web-1", ep("10.0.0.1"))},
			want: []string{
				"ClusterIP 10.96.0.1:80/TCP -> 10.0.0.1:8080",
				"NodePort 192.168.0.1:30080/TCP -> 10.0.0.1:8080",
				"NodePort 192.168.1.1:30080/TCP -> 10.0.0.1:8080",
				"LoadBalancer 198.51.100.9:80/TCP -> 10.0.0.1:8080",
				"ExternalIP 203.0.113.7:80/TCP -> 10.0.0.1:8080",
			},
		},
		{
			name: "--nodeport-addresses CIDRs filter the node's addresses",
			cfg:  Config{NodePortAddresses: []string{"192.168.1.0/24"}},
			svc:  svc("web", func(s *Service) { s.Ports[0].NodePort = 30080 }),
			nodes: []*Node{{Name: thisNode, InternalIPs: []netip.Addr{ip("192.168.0.1")},
				ExternalIPs: []netip.Addr{ip("192.168.1.1")}}},
			want: []string{"ClusterIP 10.96.0.1:80/TCP -> ", "NodePort 192.168.1.1:30080/TCP -> "},
		},
		{
			name: "--nodeport-addresses primary takes the first InternalIP of each family",
			cfg:  Config{NodePortAddresses: []string{"primary"}},
			svc:  svc("web", func(s *Service) { s.Ports[0].NodePort = 30080 }),
			nodes: []*Node{{Name: thisNode, InternalIPs: []netip.Addr{ip("192.168.0.5"), ip("192.168.0.1")},
				ExternalIPs: []netip.Addr{ip("198.51.100.1")}}},
			want: []string{"ClusterIP 10.96.0.1:80/TCP -> ", "NodePort 192.168.0.5:30080/TCP -> "},
		},
		{
			name:  "--bind-address overrides the primary IP of its family for --nodeport-addresses primary",
			cfg:   Config{NodePortAddresses: []string{"primary"}, BindAddress: ip("192.168.0.9")},
			svc:   svc("web", func(s *Service) { s.Ports[0].NodePort = 30080 }),
			nodes: []*Node{{Name: thisNode, InternalIPs: []netip.Addr{ip("192.168.0.5"), ip("fd00:10::5")}}},
			want:  []string{"ClusterIP 10.96.0.1:80/TCP -> ", "NodePort 192.168.0.9:30080/TCP -> "},
		},
		{
			name:  "an unspecified --bind-address leaves the Node's primary IP",
			cfg:   Config{NodePortAddresses: []string{"primary"}, BindAddress: ip("0.0.0.0")},
			svc:   svc("web", func(s *Service) { s.Ports[0].NodePort = 30080 }),
			nodes: []*Node{{Name: thisNode, InternalIPs: []netip.Addr{ip("192.168.0.5")}}},
			want:  []string{"ClusterIP 10.96.0.1:80/TCP -> ", "NodePort 192.168.0.5:30080/TCP -> "},
		},
		{
			name:  "--bind-address is the primary IP even before the Node has addresses",
			cfg:   Config{NodePortAddresses: []string{"primary"}, BindAddress: ip("192.168.0.9")},
			svc:   svc("web", func(s *Service) { s.Ports[0].NodePort = 30080 }),
			nodes: []*Node{{Name: thisNode}},
			want:  []string{"ClusterIP 10.96.0.1:80/TCP -> ", "NodePort 192.168.0.9:30080/TCP -> "},
		},
		{
			name: "dual-stack: IPv4 slices feed IPv4 virtual servers, IPv6 slices IPv6 ones",
			svc: svc("web", func(s *Service) {
				s.ClusterIPs = append(s.ClusterIPs, ip("fd00::1"))
				s.Ports[0].NodePort = 30080
			}),
			nodes:  []*Node{node(thisNode, thisZone, "192.168.0.1", "fd00:10::1")},
			slices: []*EndpointSlice{slice("web", "web-1", ep("10.0.0.1")), v6slice(ep("fd00:244::1"))},
			want: []string{
				"ClusterIP 10.96.0.1:80/TCP -> 10.0.0.1:8080",
				"NodePort 192.168.0.1:30080/TCP -> 10.0.0.1:8080",
				"ClusterIP [fd00::1]:80/TCP -> [fd00:244::1]:8080",
				"NodePort [fd00:10::1]:30080/TCP -> [fd00:244::1]:8080",
			},
		},
		{
			name: "single-stack: node addresses and external IPs of the other family are not served",
			svc: svc("web", func(s *Service) {
				s.Ports[0].NodePort = 30080
				s.ExternalIPs = []netip.Addr{ip("2001:db8::7")}
			}),
			nodes:  []*Node{node(thisNode, thisZone, "192.168.0.1", "fd00:10::1")},
			slices: []*EndpointSlice{v6slice(ep("fd00:244::1"))},
			want:   []string{"ClusterIP 10.96.0.1:80/TCP -> ", "NodePort 192.168.0.1:30080/TCP -> "},
		},
		{
			name: "the target port comes from the slice port matching name and protocol",
			svc: svc("dns", func(s *Service) {
				s.Ports = []ServicePort{{Name: "dns", Protocol: ProtocolUDP, Port: 53}, {Name: "dns-tcp", Protocol: ProtocolTCP, Port: 53}}
			}),
			slices: []*EndpointSlice{{Name: "dns-1", Service: ServiceKey{"default", "dns"}, IPv4: true,
				Ports: []EndpointPort{{Name: "dns", Protocol: ProtocolUDP, Port: 5353}, {Name: "dns-tcp", Protocol: ProtocolTCP, Port: 5354},
					{Name: "dns", Protocol: ProtocolTCP, Port: 9999}},
				Endpoints: []Endpoint{ep("10.0.0.1")}}},
			want: []string{"ClusterIP 10.96.0.1:53/TCP -> 10.0.0.1:5354", "ClusterIP 10.96.0.1:53/UDP -> 10.0.0.1:5353"},
		},
		{
			name:   "a slice without the service's port name feeds nothing",
			svc:    svc("web"),
			slices: []*EndpointSlice{{Name: "web-1", Service: ServiceKey{"default", "web"}, IPv4: true, Ports: []EndpointPort{{Name: "metrics", Protocol: ProtocolTCP, Port: 9100}}, Endpoints: []Endpoint{ep("10.0.0.1")}}},
			want:   []string{"ClusterIP 10.96.0.1:80/TCP -> "},
		},
		{
			name: "duplicate endpoints across slices count once",
			svc:  svc("web"),
			slices: []*EndpointSlice{
				slice("web", "web-b", ep("10.0.0.1"), ep("10.0.0.2")),
				slice("web", "web-a", ep("10.0.0.2"), ep("10.0.0.3")),
			},
			want: []string{"ClusterIP 10.96.0.1:80/TCP -> 10.0.0.1:8080 10.0.0.2:8080 10.0.0.3:8080"},
		},
		{
			name: "duplicate endpoints: the ready copy wins over the copy in the first slice",
			svc:  svc("web", internalLocal),
			slices: []*EndpointSlice{
				slice("web", "web-a", ep("10.0.0.1", local(), notReady)),
				slice("web", "web-b", ep("10.0.0.1", local())),
			},
			want: []string{"ClusterIP 10.96.0.1:80/TCP -> 10.0.0.1:8080"},
		},
		{
			name: "duplicate endpoints: between equally ready copies the slice sorting first wins",
			svc:  svc("web", internalLocal),
			slices: []*EndpointSlice{
				slice("web", "web-b", ep("10.0.0.1", on("node-b", ""))),
				slice("web", "web-a", ep("10.0.0.1", local())),
			},
			want: []string{"ClusterIP 10.96.0.1:80/TCP -> 10.0.0.1:8080"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newEngine(t, world{cfg: tc.cfg, nodes: tc.nodes, svcs: []*Service{tc.svc}, slices: tc.slices})
			plan, _ := e.Compute()
			if diff := cmp.Diff(tc.want, planLines(plan)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAnnotations(t *testing.T) {
	tests := []struct {
		name          string
		cfg           Config
		svc           *Service
		eps           []Endpoint
		wantScheduler string
		wantFlags     []string
		wantWarnings  string
	}{
		{name: "--ipvs-scheduler sets the default", cfg: Config{Scheduler: "lc"}, svc: svc("web"), wantScheduler: "lc"},
		{name: "the scheduler annotation overrides the default",
			svc: svc("web", annotate(AnnotationScheduler, "sh")), wantScheduler: "sh"},
		{name: "an invalid scheduler falls back to the default with a warning", cfg: Config{Scheduler: "wlc"},
			svc: svc("web", annotate(AnnotationScheduler, "fastest")), wantScheduler: "wlc",
			wantWarnings: `Service default/web: metadata.annotations[kube-ipvs-proxy.io/scheduler]: unknown scheduler "fastest"; using wlc`},
		{name: "--ipvs-scheduler=mh sets mh-port, as kube-proxy", cfg: Config{Scheduler: "mh"}, svc: svc("web"),
			wantScheduler: "mh", wantFlags: []string{"mh-port"}},
		{name: "the scheduler-flags annotation replaces --ipvs-scheduler=mh's mh-port", cfg: Config{Scheduler: "mh"},
			svc: svc("web", annotate(AnnotationSchedulerFlags, "mh-fallback")), wantScheduler: "mh", wantFlags: []string{"mh-fallback"}},
		{name: "an empty scheduler-flags annotation clears --ipvs-scheduler=mh's mh-port", cfg: Config{Scheduler: "mh"},
			svc: svc("web", annotate(AnnotationSchedulerFlags, "")), wantScheduler: "mh"},
		{name: "--ipvs-scheduler=mh's mh-port does not follow a service to another scheduler", cfg: Config{Scheduler: "mh"},
			svc: svc("web", annotate(AnnotationScheduler, "sh")), wantScheduler: "sh"},
		{name: "an annotated mh without --ipvs-scheduler=mh has only the annotated flags",
			svc: svc("web", annotate(AnnotationScheduler, "mh")), wantScheduler: "mh"},
		{name: "scheduler flags set mh flags, sorted and deduplicated",
			svc:           svc("web", annotate(AnnotationScheduler, "mh", AnnotationSchedulerFlags, "mh-port, mh-fallback,mh-port")),
			wantScheduler: "mh", wantFlags: []string{"mh-fallback", "mh-port"}},
		{name: "scheduler flags of another scheduler are ignored with a warning",
			svc: svc("web", annotate(AnnotationSchedulerFlags, "mh-port")), wantScheduler: "rr",
			wantWarnings: `Service default/web: metadata.annotations[kube-ipvs-proxy.io/scheduler-flags]: flag "mh-port" does not apply to scheduler rr; ignored`},
		{name: "unequal weights turn rr into wrr",
			svc: svc("web", annotate(AnnotationTrafficPolicy, "PreferLocal", AnnotationOverprovision, "1")),
			eps: []Endpoint{ep("10.0.0.1", local()), ep("10.0.0.2", local(), notReady), ep("10.0.0.3"), ep("10.0.0.4")}, wantScheduler: "wrr"},
		{name: "unequal weights turn lc into wlc",
			svc: svc("web", annotate(AnnotationScheduler, "lc", AnnotationTrafficPolicy, "PreferLocal", AnnotationOverprovision, "1")),
			eps: []Endpoint{ep("10.0.0.1", local()), ep("10.0.0.2", local(), notReady), ep("10.0.0.3"), ep("10.0.0.4")}, wantScheduler: "wlc"},
		{name: "unequal weights keep a weighted scheduler",
			svc: svc("web", annotate(AnnotationScheduler, "mh", AnnotationTrafficPolicy, "PreferLocal", AnnotationOverprovision, "1")),
			eps: []Endpoint{ep("10.0.0.1", local()), ep("10.0.0.2", local(), notReady), ep("10.0.0.3"), ep("10.0.0.4")}, wantScheduler: "mh"},
		{name: "an unknown kube-ipvs-proxy.io annotation is warned about",
			svc: svc("web", annotate(AnnotationPrefix+"traffic-polcy", "PreferLocal", "example.com/other", "x")), wantScheduler: "rr",
			wantWarnings: `Service default/web: metadata.annotations[kube-ipvs-proxy.io/traffic-polcy]: unknown annotation; ignored`},
		{name: "an unknown traffic-policy is warned about",
			svc: svc("web", annotate(AnnotationTrafficPolicy, "Local")), wantScheduler: "rr",
			wantWarnings: `Service default/web: metadata.annotations[kube-ipvs-proxy.io/traffic-policy]: unknown value "Local" (want PreferLocal or PreferZone); ignored`},
		{name: "iTP=Local overriding a tiered policy is warned about",
			svc: svc("web", internalLocal, annotate(AnnotationTrafficPolicy, "PreferZone")), wantScheduler: "rr",
			wantWarnings: `Service default/web: metadata.annotations[kube-ipvs-proxy.io/traffic-policy]: internalTrafficPolicy Local overrides PreferZone; ignored`},
		{name: "topology-keys with * not last is ignored with a warning",
			svc: svc("web", annotate(AnnotationTopologyKeys, "*,kubernetes.io/hostname")), wantScheduler: "rr",
			wantWarnings: `Service default/web: metadata.annotations[kube-ipvs-proxy.io/topology-keys]: "*" must be the last key; ignored`},
		{name: "topology-keys with an invalid label key is ignored with a warning",
			svc: svc("web", annotate(AnnotationTopologyKeys, "zone!,*")), wantScheduler: "rr",
			wantWarnings: `Service default/web: metadata.annotations[kube-ipvs-proxy.io/topology-keys]: invalid label key "zone!"; ignored`},
		{name: "topology-keys and traffic-policy together: topology-keys wins",
			svc: svc("web", annotate(AnnotationTopologyKeys, "*", AnnotationTrafficPolicy, "PreferLocal")), wantScheduler: "rr",
			wantWarnings: `Service default/web: metadata.annotations[kube-ipvs-proxy.io/traffic-policy]: kube-ipvs-proxy.io/topology-keys is also set and wins; traffic-policy PreferLocal ignored`},
		{name: "an overprovisioning factor below 1 is ignored with a warning",
			svc: svc("web", annotate(AnnotationTrafficPolicy, "PreferLocal", AnnotationOverprovision, "0.5")), wantScheduler: "rr",
			wantWarnings: `Service default/web: metadata.annotations[kube-ipvs-proxy.io/overprovisioning-factor]: invalid value "0.5" (want a decimal from 1 to 100); no spill`},
		{name: "an overprovisioning factor above 100 is ignored with a warning",
			svc: svc("web", annotate(AnnotationTrafficPolicy, "PreferLocal", AnnotationOverprovision, "101")), wantScheduler: "rr",
			wantWarnings: `Service default/web: metadata.annotations[kube-ipvs-proxy.io/overprovisioning-factor]: invalid value "101" (want a decimal from 1 to 100); no spill`},
		{name: "an overprovisioning factor NaN is ignored with a warning",
			svc: svc("web", annotate(AnnotationTrafficPolicy, "PreferLocal", AnnotationOverprovision, "NaN")), wantScheduler: "rr",
			wantWarnings: `Service default/web: metadata.annotations[kube-ipvs-proxy.io/overprovisioning-factor]: invalid value "NaN" (want a decimal from 1 to 100); no spill`},
		{name: "an overprovisioning factor without a tiered mode is ignored with a warning",
			svc: svc("web", annotate(AnnotationOverprovision, "2")), wantScheduler: "rr",
			wantWarnings: `Service default/web: metadata.annotations[kube-ipvs-proxy.io/overprovisioning-factor]: applies only with a tiered traffic-policy or topology-keys; ignored`},
		{name: "an overprovisioning factor 1_0 is not a plain decimal: ignored with a warning",
			svc: svc("web", annotate(AnnotationTrafficPolicy, "PreferLocal", AnnotationOverprovision, "1_0")), wantScheduler: "rr",
			wantWarnings: `Service default/web: metadata.annotations[kube-ipvs-proxy.io/overprovisioning-factor]: invalid value "1_0" (want a decimal from 1 to 100); no spill`},
		{name: "an overprovisioning factor 0x10 is not a plain decimal: ignored with a warning",
			svc: svc("web", annotate(AnnotationTrafficPolicy, "PreferLocal", AnnotationOverprovision, "0x10")), wantScheduler: "rr",
			wantWarnings: `Service default/web: metadata.annotations[kube-ipvs-proxy.io/overprovisioning-factor]: invalid value "0x10" (want a decimal from 1 to 100); no spill`},
		{name: "an overprovisioning factor 1e1 is not a plain decimal: ignored with a warning",
			svc: svc("web", annotate(AnnotationTrafficPolicy, "PreferLocal", AnnotationOverprovision, "1e1")), wantScheduler: "rr",
			wantWarnings: `Service default/web: metadata.annotations[kube-ipvs-proxy.io/overprovisioning-factor]: invalid value "1e1" (want a decimal from 1 to 100); no spill`},
		{name: "an overprovisioning factor +5 is not a plain decimal: ignored with a warning",
			svc: svc("web", annotate(AnnotationTrafficPolicy, "PreferLocal", AnnotationOverprovision, "+5")), wantScheduler: "rr",
			wantWarnings: `Service default/web: metadata.annotations[kube-ipvs-proxy.io/overprovisioning-factor]: invalid value "+5" (want a decimal from 1 to 100); no spill`},
		{name: "an overprovisioning factor  5 is not a plain decimal: ignored with a warning",
			svc: svc("web", annotate(AnnotationTrafficPolicy, "PreferLocal", AnnotationOverprovision, " 5")), wantScheduler: "rr",
			wantWarnings: `Service default/web: metadata.annotations[kube-ipvs-proxy.io/overprovisioning-factor]: invalid value " 5" (want a decimal from 1 to 100); no spill`},
		{name: "an overprovisioning factor Inf is not a plain decimal: ignored with a warning",
			svc: svc("web", annotate(AnnotationTrafficPolicy, "PreferLocal", AnnotationOverprovision, "Inf")), wantScheduler: "rr",
			wantWarnings: `Service default/web: metadata.annotations[kube-ipvs-proxy.io/overprovisioning-factor]: invalid value "Inf" (want a decimal from 1 to 100); no spill`},
		{name: "an overprovisioning factor 10. is not a plain decimal: ignored with a warning",
			svc: svc("web", annotate(AnnotationTrafficPolicy, "PreferLocal", AnnotationOverprovision, "10.")), wantScheduler: "rr",
			wantWarnings: `Service default/web: metadata.annotations[kube-ipvs-proxy.io/overprovisioning-factor]: invalid value "10." (want a decimal from 1 to 100); no spill`},
		{name: "an overprovisioning factor .5 is not a plain decimal: ignored with a warning",
			svc: svc("web", annotate(AnnotationTrafficPolicy, "PreferLocal", AnnotationOverprovision, ".5")), wantScheduler: "rr",
			wantWarnings: `Service default/web: metadata.annotations[kube-ipvs-proxy.io/overprovisioning-factor]: invalid value ".5" (want a decimal from 1 to 100); no spill`},
		{name: "an overprovisioning factor with a fraction is read",
			svc: svc("web", annotate(AnnotationTrafficPolicy, "PreferLocal", AnnotationOverprovision, "1.5")), wantScheduler: "rr"},
		{name: "notrack True is not one of the words the message names: warned about",
			svc: svc("web", annotate(AnnotationNoTrack, "True")), wantScheduler: "rr",
			wantWarnings: `Service default/web: metadata.annotations[kube-ipvs-proxy.io/notrack]: invalid value "True" (want true or false); tracked`},
		{name: "notrack 1 is not one of the words the message names: warned about",
			svc: svc("web", annotate(AnnotationNoTrack, "1")), wantScheduler: "rr",
			wantWarnings: `Service default/web: metadata.annotations[kube-ipvs-proxy.io/notrack]: invalid value "1" (want true or false); tracked`},
		{name: "notrack t is not one of the words the message names: warned about",
			svc: svc("web", annotate(AnnotationNoTrack, "t")), wantScheduler: "rr",
			wantWarnings: `Service default/web: metadata.annotations[kube-ipvs-proxy.io/notrack]: invalid value "t" (want true or false); tracked`},
		{name: "notrack FALSE is not one of the words the message names: warned about",
			svc: svc("web", annotate(AnnotationNoTrack, "FALSE")), wantScheduler: "rr",
			wantWarnings: `Service default/web: metadata.annotations[kube-ipvs-proxy.io/notrack]: invalid value "FALSE" (want true or false); tracked`},
		{name: "notrack false is read", svc: svc("web", annotate(AnnotationNoTrack, "false")), wantScheduler: "rr"},
		{name: "an invalid notrack value is warned about",
			svc: svc("web", annotate(AnnotationNoTrack, "yes")), wantScheduler: "rr",
			wantWarnings: `Service default/web: metadata.annotations[kube-ipvs-proxy.io/notrack]: invalid value "yes" (want true or false); tracked`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, ws := newEngine(t, world{cfg: tc.cfg, svcs: []*Service{tc.svc}, slices: []*EndpointSlice{slice("web", "web-1", tc.eps...)}})
			plan, _ := e.Compute()
			vs := vsOf(t, plan, KindClusterIP)
			if vs.Scheduler != tc.wantScheduler || !slices.Equal(vs.SchedulerFlags, tc.wantFlags) {
				t.Errorf("scheduler %s %v, want %s %v (reason %q)", vs.Scheduler, vs.SchedulerFlags, tc.wantScheduler, tc.wantFlags, vs.Reason)
			}
			if got := warningsText(ws); got != tc.wantWarnings {
				t.Errorf("warnings:\n got %s\nwant %s", got, tc.wantWarnings)
			}
		})
	}
}

func TestPersistenceAndNoTrackReachEveryVirtualServer(t *testing.T) {
	s := svc("web", annotate(AnnotationNoTrack, "true"), func(s *Service) {
		s.PersistenceTimeoutSeconds = 600
		s.Ports[0].NodePort = 30080
	})
	e, _ := newEngine(t, world{svcs: []*Service{s}})
	plan, _ := e.Compute()
	for _, vs := range plan.VirtualServers {
		if vs.PersistenceTimeoutSeconds != 600 || !vs.NoTrack {
			t.Errorf("%s: persistence %d notrack %v, want 600 true", vsLine(vs), vs.PersistenceTimeoutSeconds, vs.NoTrack)
		}
	}
}

// TestNoTrackIsRefusedWhereATrackedServiceSharesAnEndpoint: a NOTRACK
// service one of whose endpoints is also an endpoint of a tracked service,
// in any namespace, directly or through other NOTRACK services sharing
// endpoints with it, is served tracked, with a warning naming the tracked
// service; NOTRACK services sharing only among themselves keep NOTRACK.
func TestNoTrackIsRefusedWhereATrackedServiceSharesAnEndpoint(t *testing.T) {
	noTrack := annotate(AnnotationNoTrack, "true")
	cip := func(a string) svcOpt { return func(s *Service) { s.ClusterIPs = []netip.Addr{ip(a)} } }
	for _, tc := range []struct {
		name      string
		svcs      []*Service
		endpoints map[string][]string // service name → endpoint addresses
		want      map[string]bool     // service → its virtual servers are NOTRACK
		warn      string
	}{
		{name: "a tracked service in another namespace shares an endpoint",
			svcs:      []*Service{svc("dns", noTrack), svc("other", inNamespace("team-b"), cip("10.96.0.2"))},
			endpoints: map[string][]string{"dns": {"10.244.1.5", "10.244.1.6"}, "other": {"10.244.1.6"}},
			want:      map[string]bool{"default/dns": false, "team-b/other": false},
			warn: "Service default/dns: metadata.annotations[kube-ipvs-proxy.io/notrack]: endpoint 10.244.1.6:8080/TCP of this Service is also an endpoint of tracked Service team-b/other: " +
				"NOTRACK is not applied (a connection tracked one way only breaks TCP); this Service's traffic stays tracked"},
		{name: "through another NOTRACK service",
			svcs:      []*Service{svc("a", noTrack), svc("b", noTrack, cip("10.96.0.2")), svc("c", cip("10.96.0.3"))},
			endpoints: map[string][]string{"a": {"10.244.1.5"}, "b": {"10.244.1.5", "10.244.1.7"}, "c": {"10.244.1.7"}},
			want:      map[string]bool{"default/a": false, "default/b": false, "default/c": false},
			warn: "Service default/a: metadata.annotations[kube-ipvs-proxy.io/notrack]: endpoint 10.244.1.7:8080/TCP of NOTRACK Service default/b, which shares endpoints with this one, is also an endpoint of tracked Service default/c: " +
				"NOTRACK is not applied (a connection tracked one way only breaks TCP); this Service's traffic stays tracked\n" +
				"Service default/b: metadata.annotations[kube-ipvs-proxy.io/notrack]: endpoint 10.244.1.7:8080/TCP of this Service is also an endpoint of tracked Service default/c: " +
				"NOTRACK is not applied (a connection tracked one way only breaks TCP); this Service's traffic stays tracked"},
		{name: "both NOTRACK",
			svcs:      []*Service{svc("dns", noTrack), svc("other", noTrack, cip("10.96.0.2"))},
			endpoints: map[string][]string{"dns": {"10.244.1.5"}, "other": {"10.244.1.5"}},
			want:      map[string]bool{"default/dns": true, "default/other": true}},
		{name: "nothing shared",
			svcs:      []*Service{svc("dns", noTrack), svc("other", cip("10.96.0.2"))},
			endpoints: map[string][]string{"dns": {"10.244.1.5"}, "other": {"10.244.1.6"}},
			want:      map[string]bool{"default/dns": true, "default/other": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := world{svcs: tc.svcs}
			for _, s := range tc.svcs {
				var eps []Endpoint
				for _, a := range tc.endpoints[s.Key.Name] {
					eps = append(eps, ep(a))
				}
				sl := slice(s.Key.Name, s.Key.Name+"-1", eps...)
				sl.Service = s.Key
				w.slices = append(w.slices, sl)
			}
			e, _ := newEngine(t, w)
			plan, ws := e.Compute()
			got := map[string]bool{}
			for _, vs := range plan.VirtualServers {
				got[vs.Service.String()] = vs.NoTrack
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("NOTRACK by service (-want +got):\n%s", diff)
			}
			if got := warningsText(ws); got != tc.warn {
				t.Errorf("warnings:\n got %s\nwant %s", got, tc.warn)
			}
		})
	}
}

// TestNoTrackRefusalFollowsChanges: the refusal is recomputed when a
// tracked service's slice comes to share an endpoint and stops sharing
// it (the NOTRACK service is in the slice change's affected services),
// and when the tracked service goes (Reassigned).
func TestNoTrackRefusalFollowsChanges(t *testing.T) {
	dns := svc("dns", annotate(AnnotationNoTrack, "true"))
	other := svc("other", func(s *Service) { s.ClusterIPs = []netip.Addr{ip("10.96.0.2")} })
	e, _ := newEngine(t, world{svcs: []*Service{dns, other},
		slices: []*EndpointSlice{slice("dns", "dns-1", ep("10.244.1.5")), slice("other", "other-1", ep("10.244.1.6"))}})
	e.Reassigned()
	noTrack := func() bool {
		sp, _ := e.ComputeService(dns.Key)
		return len(sp.VirtualServers) > 0 && sp.VirtualServers[0].NoTrack
	}
	if !noTrack() {
		t.Fatal("dns is not NOTRACK while nothing is shared")
	}
	if got := e.UpsertEndpointSlice(slice("other", "other-1", ep("10.244.1.5"))); !slices.Contains(got, dns.Key) {
		t.Errorf("sharing an endpoint affects %v, want default/dns among them", got)
	}
	if noTrack() {
		t.Error("dns is NOTRACK while a tracked service shares its endpoint")
	}
	if got := e.UpsertEndpointSlice(slice("other", "other-1", ep("10.244.1.6"))); !slices.Contains(got, dns.Key) {
		t.Errorf("no longer sharing affects %v, want default/dns among them", got)
	}
	if !noTrack() {
		t.Error("dns is not NOTRACK after the tracked service stopped sharing")
	}
	e.UpsertEndpointSlice(slice("other", "other-1", ep("10.244.1.5")))
	e.DeleteService(other.Key)
	if got := e.Reassigned(); !slices.Contains(got, dns.Key) || !noTrack() {
		t.Errorf("the tracked service going reassigns %v (NOTRACK now %v), want default/dns, true", got, noTrack())
	}
	e.UpsertService(svc("dns")) // no longer NOTRACK: the index goes
	if e.nt.active {
		t.Error("the endpoint index is kept with no NOTRACK service")
	}
}

// TestIncrementalAPI: ComputeService agrees with Compute, and the
// mutators report exactly the services they affect.
func TestIncrementalAPI(t *testing.T) {
	e, _ := newEngine(t, world{
		svcs:   []*Service{svc("a"), svc("b", func(s *Service) { s.ClusterIPs = []netip.Addr{ip("10.96.0.2")} })},
		slices: []*EndpointSlice{slice("a", "s1", ep("10.0.0.1"))},
	})
	full, _ := e.Compute()
	one, ok := e.ComputeService(ServiceKey{"default", "a"})
	if !ok || len(one.VirtualServers) != 1 || !cmp.Equal(one.VirtualServers[0], full.VirtualServers[0], equateAddr) {
		t.Fatalf("ComputeService(a) = %+v, want the plan's first virtual server %+v", one, full.VirtualServers[0])
	}

	moved := slice("b", "s1", ep("10.0.0.9"))
	affected := e.UpsertEndpointSlice(moved)
	if want := []ServiceKey{{"default", "a"}, {"default", "b"}}; !cmp.Equal(affected, want) {
		t.Errorf("moving a slice affects %v, want %v", affected, want)
	}
	a, _ := e.ComputeService(ServiceKey{"default", "a"})
	b, _ := e.ComputeService(ServiceKey{"default", "b"})
	if got := dests(a.VirtualServers[0].Destinations) + "|" + dests(b.VirtualServers[0].Destinations); got != "|10.0.0.9:8080" {
		t.Errorf("after the move a|b destinations = %q, want |10.0.0.9:8080", got)
	}
	if got := e.DeleteEndpointSlice("default", "s1"); !cmp.Equal(got, []ServiceKey{{"default", "b"}}) {
		t.Errorf("deleting the slice affects %v, want [default/b]", got)
	}
	if got := e.DeleteEndpointSlice("default", "s1"); got != nil {
		t.Errorf("deleting an unknown slice affects %v, want nothing", got)
	}
	e.DeleteService(ServiceKey{"default", "a"})
	if _, ok := e.ComputeService(ServiceKey{"default", "a"}); ok {
		t.Error("a deleted service is still computed")
	}
	if e.UpsertNode(node("node-b", "zone-b")) {
		t.Error("another node reported as this node")
	}
	if !e.UpsertNode(node(thisNode, "zone-b")) || !e.DeleteNode(thisNode) {
		t.Error("this node not reported as this node")
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"a default scheduler that cannot be a kernel scheduler's name", Config{Scheduler: "Fast!"}, `invalid scheduler "Fast!"`},
		{"nodeport address that is not a CIDR", Config{NodePortAddresses: []string{"10.0.0.1"}}, `invalid nodeport address "10.0.0.1"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestPlanIsSortedByAddressProtocolPort(t *testing.T) {
	s := svc("web", func(s *Service) {
		s.ClusterIPs = []netip.Addr{ip("10.96.0.9"), ip("fd00::9")}
		s.Ports = []ServicePort{{Name: "b", Protocol: ProtocolUDP, Port: 53}, {Name: "a", Protocol: ProtocolTCP, Port: 80}, {Name: "c", Protocol: ProtocolTCP, Port: 53}}
	})
	e, _ := newEngine(t, world{svcs: []*Service{s, svc("z")}})
	plan, _ := e.Compute()
	want := []string{
		"ClusterIP 10.96.0.1:80/TCP -> ",
		"ClusterIP 10.96.0.9:53/TCP -> ", "ClusterIP 10.96.0.9:80/TCP -> ", "ClusterIP 10.96.0.9:53/UDP -> ",
		"ClusterIP [fd00::9]:53/TCP -> ", "ClusterIP [fd00::9]:80/TCP -> ", "ClusterIP [fd00::9]:53/UDP -> ",
	}
	if diff := cmp.Diff(want, planLines(plan)); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestHealthCheckCountsUniqueLocalReadyEndpoints(t *testing.T) {
	s := svc("lb", func(s *Service) {
		s.HealthCheckNodePort = 32100
		s.ExternalLocal = true
		s.Ports = append(s.Ports, ServicePort{Name: "alt", Protocol: ProtocolTCP, Port: 81})
	})
	sl := slice("lb", "lb-1", ep("10.0.0.1", local()), ep("10.0.0.2", local()), ep("10.0.0.3", local(), notReady), ep("10.0.0.4"))
	sl.Ports = append(sl.Ports, EndpointPort{Name: "alt", Protocol: ProtocolTCP, Port: 8080})
	e, _ := newEngine(t, world{svcs: []*Service{s}, slices: []*EndpointSlice{sl}})
	sp, _ := e.ComputeService(s.Key)
	if sp.HealthCheckNodePort != 32100 || sp.LocalReadyEndpoints != 2 {
		t.Errorf("health check %d with %d local ready endpoints, want 32100 with 2 (one per address:port, across ports)",
			sp.HealthCheckNodePort, sp.LocalReadyEndpoints)
	}
	plan, _ := e.Compute()
	want := []HealthCheck{{Service: ServiceKey{Namespace: "default", Name: "lb"}, NodePort: 32100, LocalReadyEndpoints: 2}}
	if !cmp.Equal(plan.HealthChecks, want) {
		t.Errorf("plan health checks %+v, want %+v", plan.HealthChecks, want)
	}
}
