package apiconv

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

const svcObj = "Service shop/web"

// testService is a valid single-stack ClusterIP Service shop/web with one
// TCP port, changed by muts.
func testService(muts ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: corev1.ServiceSpec{
			Type:       corev1.ServiceTypeClusterIP,
			ClusterIP:  "10.0.0.10",
			ClusterIPs: []string{"10.0.0.10"},
			Ports:      []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
		},
	}
	for _, m := range muts {
		m(s)
	}
	return s
}

// wantService is what testService converts to, changed by muts.
func wantService(muts ...func(*policy.Service)) *policy.Service {
	s := &policy.Service{
		Key:        policy.ServiceKey{Namespace: "shop", Name: "web"},
		ClusterIPs: addrs("10.0.0.10"),
		Ports:      []policy.ServicePort{{Name: "http", Protocol: policy.ProtocolTCP, Port: 80}},
	}
	for _, m := range muts {
		m(s)
	}
	return s
}

func withLabel(k, v string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels[k] = v
	}
}

func withClusterIPs(primary string, all ...string) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = primary, all }
}

func withPorts(ports ...corev1.ServicePort) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.Ports = ports }
}

func withIngress(ing ...corev1.LoadBalancerIngress) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
		s.Status.LoadBalancer.Ingress = ing
	}
}

func withAffinity(a corev1.ServiceAffinity, cfg *corev1.SessionAffinityConfig) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.SessionAffinity, s.Spec.SessionAffinityConfig = a, cfg }
}

func affinityTimeout(sec int32) *corev1.SessionAffinityConfig {
	return &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(sec)}}
}

func withTraffic(typ corev1.ServiceType, etp corev1.ServiceExternalTrafficPolicy, itp *corev1.ServiceInternalTrafficPolicy) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Spec.Type, s.Spec.ExternalTrafficPolicy, s.Spec.InternalTrafficPolicy = typ, etp, itp
	}
}

func lbIngress(ip string, mode *corev1.LoadBalancerIPMode) corev1.LoadBalancerIngress {
	return corev1.LoadBalancerIngress{IP: ip, IPMode: mode}
}

func TestServiceNotProxied(t *testing.T) {
	tests := []struct {
		name      string
		proxyName string
		svc       *corev1.Service
	}{
		{
			name: "headless service is not proxied",
			svc:  testService(withClusterIPs(corev1.ClusterIPNone, corev1.ClusterIPNone)),
		},
		{
			name: "headless service with only clusterIPs [None] is not proxied",
			svc:  testService(func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "", []string{corev1.ClusterIPNone} }),
		},
		{
			name: "headless service without clusterIPs is not proxied",
			svc:  testService(withClusterIPs(corev1.ClusterIPNone)),
		},
		{
			name: "ExternalName service is not proxied",
			svc: testService(withClusterIPs(""), func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeExternalName
				s.Spec.ExternalName = "db.example.com"
			}),
		},
		{
			name: "ExternalName service is not proxied even with a cluster IP",
			svc:  testService(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeExternalName }),
		},
		{
			name: "service-proxy-name label without --service-proxy-name is not proxied",
			svc:  testService(withLabel(LabelServiceProxyName, "other-proxy")),
		},
		{
			name:      "service labelled with another proxy name is not proxied",
			proxyName: "ipvs",
			svc:       testService(withLabel(LabelServiceProxyName, "other-proxy")),
		},
		{
			name:      "unlabelled service is not proxied when --service-proxy-name is set",
			proxyName: "ipvs",
			svc:       testService(),
		},
		{
			name:      "empty service-proxy-name label is not proxied when --service-proxy-name is set",
			proxyName: "ipvs",
			svc:       testService(withLabel(LabelServiceProxyName, "")),
		},
		{
			name: "service without a cluster IP is not proxied",
			svc:  testService(withClusterIPs("")),
		},
		{
			name: "service with empty clusterIPs list and no clusterIP is not proxied",
			svc:  testService(withClusterIPs("", []string{}...)),
		},
		{
			name: "proxy-name check comes before validation of other fields",
			svc:  testService(withLabel(LabelServiceProxyName, "x"), withPorts(corev1.ServicePort{Port: 0})),
		},
		{
			name: "headless check comes before port validation",
			svc:  testService(withClusterIPs(corev1.ClusterIPNone), withPorts(corev1.ServicePort{Port: 0})),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checkedService(t, tc.svc, tc.proxyName)
			checkObjectError(t, err, policy.ErrNotProxied, svcObj, "")
			if got != nil {
				t.Errorf("got service %+v with error", got)
			}
		})
	}
}

func TestService(t *testing.T) {
	tests := []struct {
		name      string
		proxyName string
		svc       *corev1.Service
		want      *policy.Service
	}{
		{
			name: "plain ClusterIP service converts",
			svc:  testService(),
			want: wantService(),
		},
		{
			name: "service in the default namespace keeps its key",
			svc:  testService(func(s *corev1.Service) { s.Namespace = "default" }),
			want: wantService(func(s *policy.Service) { s.Key.Namespace = "default" }),
		},
		// Proxy name.
		{
			name:      "service labelled with our proxy name is proxied",
			proxyName: "ipvs",
			svc:       testService(withLabel(LabelServiceProxyName, "ipvs")),
			want:      wantService(),
		},
		{
			name: "unrelated labels do not stop proxying",
			svc:  testService(withLabel("app", "web")),
			want: wantService(),
		},
		// Cluster IPs.
		{
			name: "clusterIP alone is used when clusterIPs is empty",
			svc:  testService(withClusterIPs("10.0.0.10")),
			want: wantService(),
		},
		{
			name: "clusterIPs alone is used when clusterIP is empty",
			svc:  testService(withClusterIPs("", "10.0.0.10")),
			want: wantService(),
		},
		{
			name: "IPv6 single-stack service converts",
			svc:  testService(withClusterIPs("fd00::10", "fd00::10")),
			want: wantService(func(s *policy.Service) { s.ClusterIPs = addrs("fd00::10") }),
		},
		{
			name: "dual-stack IPv4-primary service keeps both cluster IPs in order",
			svc:  testService(withClusterIPs("10.0.0.10", "10.0.0.10", "fd00::10")),
			want: wantService(func(s *policy.Service) { s.ClusterIPs = addrs("10.0.0.10", "fd00::10") }),
		},
		{
			name: "dual-stack IPv6-primary service keeps both cluster IPs in order",
			svc:  testService(withClusterIPs("fd00::10", "fd00::10", "10.0.0.10")),
			want: wantService(func(s *policy.Service) { s.ClusterIPs = addrs("fd00::10", "10.0.0.10") }),
		},
		// External IPs.
		{
			name: "externalIPs are parsed in order",
			svc:  testService(func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.0.2.1", "2001:db8::1"} }),
			want: wantService(func(s *policy.Service) { s.ExternalIPs = addrs("192.0.2.1", "2001:db8::1") }),
		},
		// Load-balancer ingress.
		{
			name: "ingress with nil ipMode is kept",
			svc:  testService(withIngress(lbIngress("192.0.2.10", nil))),
			want: wantService(func(s *policy.Service) { s.LoadBalancerIPs = addrs("192.0.2.10") }),
		},
		{
			name: "ingress with ipMode VIP is kept",
			svc:  testService(withIngress(lbIngress("2001:db8::10", ptr(corev1.LoadBalancerIPModeVIP)))),
			want: wantService(func(s *policy.Service) { s.LoadBalancerIPs = addrs("2001:db8::10") }),
		},
		{
			name: "ingress with ipMode Proxy is skipped",
			svc:  testService(withIngress(lbIngress("192.0.2.10", ptr(corev1.LoadBalancerIPModeProxy)))),
			want: wantService(),
		},
		{
			name: "ingress with ipMode Proxy is skipped without parsing its IP",
			svc:  testService(withIngress(lbIngress("not-an-ip", ptr(corev1.LoadBalancerIPModeProxy)))),
			want: wantService(),
		},
		{
			name: "hostname-only ingress is skipped",
			svc:  testService(withIngress(corev1.LoadBalancerIngress{Hostname: "lb.example.com"})),
			want: wantService(),
		},
		{
			name: "mixed ingress keeps only VIP and nil-mode IPs in order",
			svc: testService(withIngress(
				lbIngress("192.0.2.1", ptr(corev1.LoadBalancerIPModeProxy)),
				lbIngress("192.0.2.2", nil),
				corev1.LoadBalancerIngress{Hostname: "lb.example.com"},
				lbIngress("192.0.2.3", ptr(corev1.LoadBalancerIPModeVIP)),
			)),
			want: wantService(func(s *policy.Service) { s.LoadBalancerIPs = addrs("192.0.2.2", "192.0.2.3") }),
		},
		// Ports.
		{
			name: "empty protocol defaults to TCP",
			svc:  testService(withPorts(corev1.ServicePort{Name: "http", Port: 80})),
			want: wantService(),
		},
		{
			name: "UDP and SCTP ports convert",
			svc: testService(withPorts(
				corev1.ServicePort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53},
				corev1.ServicePort{Name: "sig", Protocol: corev1.ProtocolSCTP, Port: 3868},
			)),
			want: wantService(func(s *policy.Service) {
				s.Ports = []policy.ServicePort{
					{Name: "dns", Protocol: policy.ProtocolUDP, Port: 53},
					{Name: "sig", Protocol: policy.ProtocolSCTP, Port: 3868},
				}
			}),
		},
		{
			name: "same port with different protocols is allowed",
			svc: testService(withPorts(
				corev1.ServicePort{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53},
				corev1.ServicePort{Name: "dns-udp", Protocol: corev1.ProtocolUDP, Port: 53},
			)),
			want: wantService(func(s *policy.Service) {
				s.Ports = []policy.ServicePort{
					{Name: "dns-tcp", Protocol: policy.ProtocolTCP, Port: 53},
					{Name: "dns-udp", Protocol: policy.ProtocolUDP, Port: 53},
				}
			}),
		},
		{
			name: "port bounds 1 and 65535 and nodePort bounds 0 and 65535 are valid",
			svc: testService(withPorts(
				corev1.ServicePort{Name: "lo", Port: 1, NodePort: 0},
				corev1.ServicePort{Name: "hi", Port: 65535, NodePort: 65535},
			)),
			want: wantService(func(s *policy.Service) {
				s.Ports = []policy.ServicePort{
					{Name: "lo", Protocol: policy.ProtocolTCP, Port: 1},
					{Name: "hi", Protocol: policy.ProtocolTCP, Port: 65535, NodePort: 65535},
				}
			}),
		},
		{
			name: "nodePort is copied",
			svc: testService(withTraffic(corev1.ServiceTypeNodePort, "", nil),
				withPorts(corev1.ServicePort{Name: "http", Port: 80, NodePort: 30080})),
			want: wantService(func(s *policy.Service) { s.Ports[0].NodePort = 30080 }),
		},
		{
			name: "targetPort and appProtocol do not affect the result",
			svc: testService(withPorts(corev1.ServicePort{
				Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), AppProtocol: ptr("http"),
			})),
			want: wantService(),
		},
		{
			name: "single unnamed port is allowed",
			svc:  testService(withPorts(corev1.ServicePort{Port: 80})),
			want: wantService(func(s *policy.Service) { s.Ports[0].Name = "" }),
		},
		{
			name: "service without ports converts with no ports",
			svc:  testService(withPorts()),
			want: wantService(func(s *policy.Service) { s.Ports = nil }),
		},
		// Session affinity.
		{
			name: "ClientIP affinity without config defaults to 10800",
			svc:  testService(withAffinity(corev1.ServiceAffinityClientIP, nil)),
			want: wantService(func(s *policy.Service) { s.PersistenceTimeoutSeconds = 10800 }),
		},
		{
			name: "ClientIP affinity with nil clientIP config defaults to 10800",
			svc:  testService(withAffinity(corev1.ServiceAffinityClientIP, &corev1.SessionAffinityConfig{})),
			want: wantService(func(s *policy.Service) { s.PersistenceTimeoutSeconds = 10800 }),
		},
		{
			name: "ClientIP affinity with nil timeout defaults to 10800",
			svc: testService(withAffinity(corev1.ServiceAffinityClientIP,
				&corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{}})),
			want: wantService(func(s *policy.Service) { s.PersistenceTimeoutSeconds = 10800 }),
		},
		{
			name: "ClientIP affinity explicit timeout is used",
			svc:  testService(withAffinity(corev1.ServiceAffinityClientIP, affinityTimeout(600))),
			want: wantService(func(s *policy.Service) { s.PersistenceTimeoutSeconds = 600 }),
		},
		{
			name: "ClientIP affinity timeout 1 is valid",
			svc:  testService(withAffinity(corev1.ServiceAffinityClientIP, affinityTimeout(1))),
			want: wantService(func(s *policy.Service) { s.PersistenceTimeoutSeconds = 1 }),
		},
		{
			name: "ClientIP affinity timeout 86400 is valid",
			svc:  testService(withAffinity(corev1.ServiceAffinityClientIP, affinityTimeout(86400))),
			want: wantService(func(s *policy.Service) { s.PersistenceTimeoutSeconds = 86400 }),
		},
		{
			name: "affinity None gives timeout 0",
			svc:  testService(withAffinity(corev1.ServiceAffinityNone, nil)),
			want: wantService(),
		},
		{
			name: "affinity None ignores an out-of-range timeout",
			svc:  testService(withAffinity(corev1.ServiceAffinityNone, affinityTimeout(0))),
			want: wantService(),
		},
		{
			name: "empty affinity gives timeout 0",
			svc:  testService(withAffinity("", affinityTimeout(600))),
			want: wantService(),
		},
		// Traffic policies.
		{
			name: "internalTrafficPolicy Local sets InternalLocal",
			svc:  testService(withTraffic(corev1.ServiceTypeClusterIP, "", ptr(corev1.ServiceInternalTrafficPolicyLocal))),
			want: wantService(func(s *policy.Service) { s.InternalLocal = true }),
		},
		{
			name: "internalTrafficPolicy Cluster leaves InternalLocal false",
			svc:  testService(withTraffic(corev1.ServiceTypeClusterIP, "", ptr(corev1.ServiceInternalTrafficPolicyCluster))),
			want: wantService(),
		},
		{
			name: "internalTrafficPolicy nil leaves InternalLocal false",
			svc:  testService(withTraffic(corev1.ServiceTypeClusterIP, "", nil)),
			want: wantService(),
		},
		{
			name: "externalTrafficPolicy Local on NodePort sets ExternalLocal",
			svc:  testService(withTraffic(corev1.ServiceTypeNodePort, corev1.ServiceExternalTrafficPolicyLocal, nil)),
			want: wantService(func(s *policy.Service) { s.ExternalLocal = true }),
		},
		{
			name: "externalTrafficPolicy Local on LoadBalancer sets ExternalLocal",
			svc:  testService(withTraffic(corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyLocal, nil)),
			want: wantService(func(s *policy.Service) { s.ExternalLocal = true }),
		},
		{
			name: "externalTrafficPolicy Local on ClusterIP type leaves ExternalLocal false",
			svc:  testService(withTraffic(corev1.ServiceTypeClusterIP, corev1.ServiceExternalTrafficPolicyLocal, nil)),
			want: wantService(),
		},
		{
			name: "healthCheckNodePort is kept for an eTP=Local load balancer",
			svc: testService(withTraffic(corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyLocal, nil),
				func(s *corev1.Service) { s.Spec.HealthCheckNodePort = 32100 }),
			want: wantService(func(s *policy.Service) { s.ExternalLocal, s.HealthCheckNodePort = true, 32100 }),
		},
		{
			name: "healthCheckNodePort is ignored on an eTP=Local NodePort service, as kube-proxy",
			svc: testService(withTraffic(corev1.ServiceTypeNodePort, corev1.ServiceExternalTrafficPolicyLocal, nil),
				func(s *corev1.Service) { s.Spec.HealthCheckNodePort = 32100 }),
			want: wantService(func(s *policy.Service) { s.ExternalLocal = true }),
		},
		{
			name: "loadBalancerSourceRanges are parsed, trimmed and masked",
			svc: testService(func(s *corev1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{" 203.0.113.7/24", "2001:db8::/32"}
			}),
			want: wantService(func(s *policy.Service) {
				s.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8::/32")}
			}),
		},
		{
			name: "externalTrafficPolicy Local on ClusterIP type with external IPs sets ExternalLocal, as kube-proxy",
			svc: testService(withTraffic(corev1.ServiceTypeClusterIP, corev1.ServiceExternalTrafficPolicyLocal, nil),
				func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"198.51.100.1"} }),
			want: wantService(func(s *policy.Service) {
				s.ExternalLocal = true
				s.ExternalIPs = []netip.Addr{netip.MustParseAddr("198.51.100.1")}
			}),
		},
		{
			name: "externalTrafficPolicy Local on empty type leaves ExternalLocal false",
			svc:  testService(withTraffic("", corev1.ServiceExternalTrafficPolicyLocal, nil)),
			want: wantService(),
		},
		{
			name: "externalTrafficPolicy Cluster on LoadBalancer leaves ExternalLocal false",
			svc:  testService(withTraffic(corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyCluster, nil)),
			want: wantService(),
		},
		{
			name: "both traffic policies Local set both flags",
			svc: testService(withTraffic(corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyLocal,
				ptr(corev1.ServiceInternalTrafficPolicyLocal))),
			want: wantService(func(s *policy.Service) { s.InternalLocal, s.ExternalLocal = true, true }),
		},
		// Annotations.
		{
			name: "annotations are passed through",
			svc: testService(func(s *corev1.Service) {
				s.Annotations = map[string]string{"kube-ipvs-proxy.io/scheduler": "wrr", "other": "x"}
			}),
			want: wantService(func(s *policy.Service) {
				s.Annotations = map[string]string{"kube-ipvs-proxy.io/scheduler": "wrr", "other": "x"}
			}),
		},
		// Everything at once.
		{
			name: "full dual-stack LoadBalancer service converts every field",
			svc: testService(
				withClusterIPs("10.0.0.10", "10.0.0.10", "fd00::10"),
				withTraffic(corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyLocal, ptr(corev1.ServiceInternalTrafficPolicyCluster)),
				withIngress(lbIngress("192.0.2.10", nil), lbIngress("2001:db8::10", ptr(corev1.LoadBalancerIPModeVIP))),
				withPorts(
					corev1.ServicePort{Name: "http", Port: 80, NodePort: 30080},
					corev1.ServicePort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, NodePort: 30053},
				),
				withAffinity(corev1.ServiceAffinityClientIP, affinityTimeout(300)),
				func(s *corev1.Service) {
					s.Spec.ExternalIPs = []string{"198.51.100.1"}
					s.Annotations = map[string]string{"a": "b"}
				},
			),
			want: &policy.Service{
				Key:             policy.ServiceKey{Namespace: "shop", Name: "web"},
				ClusterIPs:      addrs("10.0.0.10", "fd00::10"),
				ExternalIPs:     addrs("198.51.100.1"),
				LoadBalancerIPs: addrs("192.0.2.10", "2001:db8::10"),
				Ports: []policy.ServicePort{
					{Name: "http", Protocol: policy.ProtocolTCP, Port: 80, NodePort: 30080},
					{Name: "dns", Protocol: policy.ProtocolUDP, Port: 53, NodePort: 30053},
				},
				ExternalLocal:             true,
				PersistenceTimeoutSeconds: 300,
				Annotations:               map[string]string{"a": "b"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checkedService(t, tc.svc, tc.proxyName)
			if err != nil {
				t.Fatalf("Service: unexpected error %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmpOpts...); diff != "" {
				t.Errorf("Service mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServiceDoesNotModifyInput(t *testing.T) {
	in := testService(
		withClusterIPs("10.0.0.10", "10.0.0.10", "fd00::10"),
		withIngress(lbIngress("192.0.2.10", nil)),
		withAffinity(corev1.ServiceAffinityClientIP, nil),
	)
	before := in.DeepCopy()
	if _, err := Service(in, ""); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, in); diff != "" {
		t.Errorf("Service modified its input (-before +after):\n%s", diff)
	}
}

func TestParseIP(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    netip.Addr
		wantErr bool
	}{
		{name: "IPv4 parses", in: "10.0.0.1", want: netip.MustParseAddr("10.0.0.1")},
		{name: "IPv6 parses", in: "fd00::1", want: netip.MustParseAddr("fd00::1")},
		{name: "IPv6 with upper-case hex parses", in: "FD00::A", want: netip.MustParseAddr("fd00::a")},
		{name: "empty string is refused", in: "", wantErr: true},
		{name: "hostname is refused", in: "example.com", wantErr: true},
		{name: "CIDR is refused", in: "10.0.0.0/8", wantErr: true},
		{name: "IPv4 with leading zero is refused", in: "010.0.0.1", wantErr: true},
		{name: "zoned IPv6 is refused", in: "fe80::1%eth0", wantErr: true},
		{name: "IPv4-mapped IPv6 is refused", in: "::ffff:10.0.0.1", wantErr: true},
		{name: "IPv4-mapped IPv6 in hex form is refused", in: "::ffff:a00:1", wantErr: true},
		{name: "IPv4-compatible IPv6 is plain IPv6", in: "::10.0.0.1", want: netip.MustParseAddr("::a00:1")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseIP(tc.in)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParseIP(%q) = %v, want error", tc.in, got)
				}
				if got.IsValid() {
					t.Errorf("ParseIP(%q) returned valid address %v with error", tc.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseIP(%q): %v", tc.in, err)
			}
			if got != tc.want {
				t.Errorf("ParseIP(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}
