package apiconv

import (
	"errors"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	corev1 "k8s.io/api/core/v1"
)

func TestServiceInvalid(t *testing.T) {
	tests := []struct {
		name      string
		svc       *corev1.Service
		wantField string
	}{
		{
			name:      "empty name is invalid",
			svc:       testService(func(s *corev1.Service) { s.Name = "" }),
			wantField: "metadata.name",
		},
		{
			name:      "an unknown sessionAffinity is invalid, not None",
			svc:       testService(func(s *corev1.Service) { s.Spec.SessionAffinity = "Sticky" }),
			wantField: "spec.sessionAffinity",
		},
		{
			name: "an unknown internalTrafficPolicy is invalid, not Cluster",
			svc: testService(func(s *corev1.Service) {
				itp := corev1.ServiceInternalTrafficPolicy("Sideways")
				s.Spec.InternalTrafficPolicy = &itp
			}),
			wantField: "spec.internalTrafficPolicy",
		},
		{
			name:      "an unknown externalTrafficPolicy is invalid, not Cluster",
			svc:       testService(func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = "Nearby" }),
			wantField: "spec.externalTrafficPolicy",
		},
		// Cluster IPs.
		{
			name:      "clusterIP differing from clusterIPs[0] is invalid",
			svc:       testService(withClusterIPs("10.0.0.10", "10.0.0.11")),
			wantField: "spec.clusterIPs[0]",
		},
		{
			name:      "clusterIP equal to clusterIPs[1] but not clusterIPs[0] is invalid",
			svc:       testService(withClusterIPs("fd00::10", "10.0.0.10", "fd00::10")),
			wantField: "spec.clusterIPs[0]",
		},
		{
			name:      "three clusterIPs are invalid",
			svc:       testService(withClusterIPs("10.0.0.10", "10.0.0.10", "fd00::10", "10.0.0.11")),
			wantField: "spec.clusterIPs",
		},
		{
			name:      "two IPv4 clusterIPs are invalid",
			svc:       testService(withClusterIPs("10.0.0.10", "10.0.0.10", "10.0.0.11")),
			wantField: "spec.clusterIPs",
		},
		{
			name:      "two IPv6 clusterIPs are invalid",
			svc:       testService(withClusterIPs("fd00::10", "fd00::10", "fd00::11")),
			wantField: "spec.clusterIPs",
		},
		{
			name:      "unparsable clusterIP is invalid",
			svc:       testService(withClusterIPs("not-an-ip")),
			wantField: "spec.clusterIPs[0]",
		},
		{
			name:      "unparsable clusterIPs[0] is invalid",
			svc:       testService(withClusterIPs("", "10.0.0.300")),
			wantField: "spec.clusterIPs[0]",
		},
		{
			name:      "unparsable second clusterIP names clusterIPs[1]",
			svc:       testService(withClusterIPs("10.0.0.10", "10.0.0.10", "bogus")),
			wantField: "spec.clusterIPs[1]",
		},
		{
			name:      "zoned clusterIP is refused",
			svc:       testService(withClusterIPs("fe80::1%eth0", "fe80::1%eth0")),
			wantField: "spec.clusterIPs[0]",
		},
		{
			name:      "IPv4-mapped IPv6 clusterIP is refused",
			svc:       testService(withClusterIPs("::ffff:10.0.0.10", "::ffff:10.0.0.10")),
			wantField: "spec.clusterIPs[0]",
		},
		{
			name:      "CIDR as clusterIP is invalid",
			svc:       testService(withClusterIPs("10.0.0.0/24")),
			wantField: "spec.clusterIPs[0]",
		},
		// Ports.
		{
			name:      "unknown protocol is invalid",
			svc:       testService(withPorts(corev1.ServicePort{Name: "x", Protocol: "ICMP", Port: 80})),
			wantField: "spec.ports[0].protocol",
		},
		{
			name:      "lower-case protocol is invalid",
			svc:       testService(withPorts(corev1.ServicePort{Name: "x", Protocol: "tcp", Port: 80})),
			wantField: "spec.ports[0].protocol",
		},
		{
			name:      "port 0 is invalid",
			svc:       testService(withPorts(corev1.ServicePort{Name: "x", Port: 0})),
			wantField: "spec.ports[0].port",
		},
		{
			name:      "negative port is invalid",
			svc:       testService(withPorts(corev1.ServicePort{Name: "x", Port: -80})),
			wantField: "spec.ports[0].port",
		},
		{
			name:      "port 65536 is invalid",
			svc:       testService(withPorts(corev1.ServicePort{Name: "x", Port: 65536})),
			wantField: "spec.ports[0].port",
		},
		{
			name: "invalid second port names ports[1]",
			svc: testService(withPorts(
				corev1.ServicePort{Name: "a", Port: 80},
				corev1.ServicePort{Name: "b", Port: 70000},
			)),
			wantField: "spec.ports[1].port",
		},
		{
			name:      "nodePort -1 is invalid",
			svc:       testService(withPorts(corev1.ServicePort{Name: "x", Port: 80, NodePort: -1})),
			wantField: "spec.ports[0].nodePort",
		},
		{
			name:      "nodePort 65536 is invalid",
			svc:       testService(withPorts(corev1.ServicePort{Name: "x", Port: 80, NodePort: 65536})),
			wantField: "spec.ports[0].nodePort",
		},
		{
			name: "duplicate port and protocol is invalid",
			svc: testService(withPorts(
				corev1.ServicePort{Name: "a", Protocol: corev1.ProtocolUDP, Port: 53},
				corev1.ServicePort{Name: "b", Protocol: corev1.ProtocolUDP, Port: 53},
			)),
			wantField: "spec.ports[1]",
		},
		{
			name: "empty protocol duplicates explicit TCP",
			svc: testService(withPorts(
				corev1.ServicePort{Name: "a", Protocol: corev1.ProtocolTCP, Port: 80},
				corev1.ServicePort{Name: "b", Port: 80},
			)),
			wantField: "spec.ports[1]",
		},
		{
			name: "duplicate port name is invalid",
			svc: testService(withPorts(
				corev1.ServicePort{Name: "web", Port: 80},
				corev1.ServicePort{Name: "web", Port: 443},
			)),
			wantField: "spec.ports[1].name",
		},
		{
			name: "two unnamed ports are a duplicate name",
			svc: testService(withPorts(
				corev1.ServicePort{Port: 80},
				corev1.ServicePort{Port: 443},
			)),
			wantField: "spec.ports[1].name",
		},
		// Session affinity.
		{
			name:      "affinity timeout 0 is invalid",
			svc:       testService(withAffinity(corev1.ServiceAffinityClientIP, affinityTimeout(0))),
			wantField: "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
		},
		{
			name:      "negative affinity timeout is invalid",
			svc:       testService(withAffinity(corev1.ServiceAffinityClientIP, affinityTimeout(-1))),
			wantField: "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
		},
		{
			name:      "affinity timeout 86401 is invalid",
			svc:       testService(withAffinity(corev1.ServiceAffinityClientIP, affinityTimeout(86401))),
			wantField: "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := svcObj
			if tc.svc.Name == "" {
				obj = "Service shop/"
			}
			got, err := checkedService(t, tc.svc, "")
			checkObjectError(t, err, policy.ErrInvalid, obj, tc.wantField)
			if got != nil {
				t.Errorf("got service %+v with error", got)
			}
		})
	}
}

func TestServiceErrorStrings(t *testing.T) {
	tests := []struct {
		name      string
		proxyName string
		svc       *corev1.Service
		sentinel  error
		want      string
	}{
		{
			name:     "port out of range message names object, field and value",
			svc:      testService(withPorts(corev1.ServicePort{Name: "http", Port: 0})),
			sentinel: policy.ErrInvalid,
			want:     "Service shop/web: spec.ports[0].port: must be 1-65535, got 0",
		},
		{
			name:     "clusterIP mismatch message quotes both addresses",
			svc:      testService(withClusterIPs("10.0.0.10", "10.0.0.11")),
			sentinel: policy.ErrInvalid,
			want:     `Service shop/web: spec.clusterIPs[0]: "10.0.0.11" differs from spec.clusterIP "10.0.0.10"`,
		},
		{
			name:     "IPv4-mapped message says IPv4-mapped",
			svc:      testService(withClusterIPs("::ffff:10.0.0.10")),
			sentinel: policy.ErrInvalid,
			want:     `Service shop/web: spec.clusterIPs[0]: invalid IP: IPv4-mapped IPv6 address "::ffff:10.0.0.10"`,
		},
		{
			name:     "duplicate port message names port and protocol",
			svc:      testService(withPorts(corev1.ServicePort{Name: "a", Port: 53, Protocol: corev1.ProtocolUDP}, corev1.ServicePort{Name: "b", Port: 53, Protocol: corev1.ProtocolUDP})),
			sentinel: policy.ErrInvalid,
			want:     "Service shop/web: spec.ports[1]: duplicate port 53/UDP",
		},
		{
			name:     "affinity timeout message gives the range",
			svc:      testService(withAffinity(corev1.ServiceAffinityClientIP, affinityTimeout(86401))),
			sentinel: policy.ErrInvalid,
			want:     "Service shop/web: spec.sessionAffinityConfig.clientIP.timeoutSeconds: must be 1-86400, got 86401",
		},
		{
			name:     "headless message has no field",
			svc:      testService(withClusterIPs(corev1.ClusterIPNone)),
			sentinel: policy.ErrNotProxied,
			want:     "Service shop/web: headless (clusterIP None)",
		},
		{
			name:      "other proxy message names the wanted label",
			proxyName: "ipvs",
			svc:       testService(),
			sentinel:  policy.ErrNotProxied,
			want:      "Service shop/web: not labelled service.kubernetes.io/service-proxy-name=ipvs",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := checkedService(t, tc.svc, tc.proxyName)
			if err == nil {
				t.Fatalf("got nil error, want %q", tc.want)
			}
			if !errors.Is(err, tc.sentinel) {
				t.Errorf("error %q does not wrap %v", err, tc.sentinel)
			}
			if err.Error() != tc.want {
				t.Errorf("error =\n  %s\nwant\n  %s", err, tc.want)
			}
		})
	}
}
