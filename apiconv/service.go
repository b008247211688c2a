package apiconv

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// defaultAffinityTimeout is the API default for
// sessionAffinityConfig.clientIP.timeoutSeconds.
const defaultAffinityTimeout = 10800

// Service converts svc. proxyName is --service-proxy-name: when empty,
// services carrying the service-proxy-name label are not proxied; when
// set, exactly the services labelled with it are. An external or
// load-balancer IP or a source range that is malformed, refused or
// repeated is left out with a warning in the result's Warnings
// (addresses.go), the rest of the Service kept.
func Service(svc *corev1.Service, proxyName string) (*policy.Service, error) {
	obj := ObjectName("Service", svc.Namespace, svc.Name)
	if svc.Name == "" {
		return nil, invalid(obj, "metadata.name", "must not be empty")
	}
	if err := checkProxyName(obj, svc.Labels[LabelServiceProxyName], proxyName); err != nil {
		return nil, err
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil, notProxied(obj, "type ExternalName")
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone || len(svc.Spec.ClusterIPs) > 0 && svc.Spec.ClusterIPs[0] == corev1.ClusterIPNone {
		return nil, notProxied(obj, "headless (clusterIP None)")
	}
	s := &policy.Service{Key: policy.ServiceKey{Namespace: svc.Namespace, Name: svc.Name},
		Created: svc.CreationTimestamp.Time, Annotations: svc.Annotations}
	var err error
	if s.ClusterIPs, err = clusterIPs(obj, svc); err != nil {
		return nil, err
	}
	s.Warnings = addresses(obj, svc, s)
	if s.Ports, err = servicePorts(obj, svc.Spec.Ports); err != nil {
		return nil, err
	}
	if s.PersistenceTimeoutSeconds, err = affinity(obj, svc); err != nil {
		return nil, err
	}
	if err := trafficPolicies(obj, svc); err != nil {
		return nil, err
	}
	itp := svc.Spec.InternalTrafficPolicy
	s.InternalLocal = itp != nil && *itp == corev1.ServiceInternalTrafficPolicyLocal
	s.ExternalLocal = externallyAccessible(svc) && svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	// kube-proxy's NeedsHealthCheck: only eTP=Local load balancers.
	if s.ExternalLocal && svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		p := svc.Spec.HealthCheckNodePort
		if p < 0 || p > 65535 {
			return nil, invalid(obj, "spec.healthCheckNodePort", "must be 0-65535, got %d", p)
		}
		s.HealthCheckNodePort = uint16(p)
	}
	return s, nil
}

// trafficPolicies checks the values the API server would accept: an
// unknown one is refused rather than read as the default.
func trafficPolicies(obj string, svc *corev1.Service) error {
	if itp := svc.Spec.InternalTrafficPolicy; itp != nil {
		switch *itp {
		case corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicyLocal:
		default:
			return invalid(obj, "spec.internalTrafficPolicy", "must be Cluster or Local, got %q", *itp)
		}
	}
	switch svc.Spec.ExternalTrafficPolicy {
	case "", corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal:
		return nil
	}
	return invalid(obj, "spec.externalTrafficPolicy", "must be Cluster or Local, got %q", svc.Spec.ExternalTrafficPolicy)
}

// externallyAccessible is kube-proxy's rule for whether
// externalTrafficPolicy applies: NodePort and LoadBalancer services, and
// ClusterIP services with external IPs.
func externallyAccessible(svc *corev1.Service) bool {
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		return true
	case corev1.ServiceTypeClusterIP, "":
		return len(svc.Spec.ExternalIPs) > 0
	}
	return false
}

func checkProxyName(obj, label, want string) error {
	switch {
	case want == "" && label != "":
		return notProxied(obj, "labelled %s=%s", LabelServiceProxyName, label)
	case want != "" && label != want:
		return notProxied(obj, "not labelled %s=%s", LabelServiceProxyName, want)
	}
	return nil
}

func clusterIPs(obj string, svc *corev1.Service) ([]netip.Addr, error) {
	raw := svc.Spec.ClusterIPs
	if len(raw) == 0 && svc.Spec.ClusterIP != "" {
		raw = []string{svc.Spec.ClusterIP}
	}
	if len(raw) == 0 {
		return nil, notProxied(obj, "no cluster IP allocated")
	}
	if svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != raw[0] {
		return nil, invalid(obj, "spec.clusterIPs[0]", "%q differs from spec.clusterIP %q", raw[0], svc.Spec.ClusterIP)
	}
	if len(raw) > 2 {
		return nil, invalid(obj, "spec.clusterIPs", "at most two entries (one per family), got %d", len(raw))
	}
	ips, err := ipList(obj, "spec.clusterIPs", raw)
	if err != nil {
		return nil, err
	}
	if len(ips) == 2 && ips[0].Is4() == ips[1].Is4() {
		return nil, invalid(obj, "spec.clusterIPs", "both entries are of one family")
	}
	return ips, nil
}

// ParseIP parses an unzoned IPv4 or IPv6 address, refusing IPv4-mapped
// IPv6 forms that would confuse family matching.
func ParseIP(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, err
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("zoned address %q", s)
	}
	if a.Is4In6() {
		return netip.Addr{}, fmt.Errorf("IPv4-mapped IPv6 address %q", s)
	}
	return a, nil
}

func ipList(obj, field string, raw []string) ([]netip.Addr, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	out := make([]netip.Addr, 0, len(raw))
	for i, r := range raw {
		a, err := ParseIP(r)
		if err != nil {
			return nil, invalid(obj, fmt.Sprintf("%s[%d]", field, i), "invalid IP: %v", err)
		}
		out = append(out, a)
	}
	return out, nil
}

func protocol(p corev1.Protocol) (policy.Protocol, bool) {
	switch p {
	case "", corev1.ProtocolTCP:
		return policy.ProtocolTCP, true
	case corev1.ProtocolUDP:
		return policy.ProtocolUDP, true
	case corev1.ProtocolSCTP:
		return policy.ProtocolSCTP, true
	}
	return "", false
}

func servicePorts(obj string, ports []corev1.ServicePort) ([]policy.ServicePort, error) {
	out := make([]policy.ServicePort, 0, len(ports))
	type portID struct {
		proto policy.Protocol
		port  int32
	}
	seenPort := make(map[portID]bool, len(ports))
	seenName := make(map[string]bool, len(ports))
	for i, p := range ports {
		field := fmt.Sprintf("spec.ports[%d]", i)
		proto, ok := protocol(p.Protocol)
		switch {
		case !ok:
			return nil, invalid(obj, field+".protocol", "unsupported protocol %q", p.Protocol)
		case p.Port < 1 || p.Port > 65535:
			return nil, invalid(obj, field+".port", "must be 1-65535, got %d", p.Port)
		case p.NodePort < 0 || p.NodePort > 65535:
			return nil, invalid(obj, field+".nodePort", "must be 0-65535, got %d", p.NodePort)
		case seenPort[portID{proto, p.Port}]:
			return nil, invalid(obj, field, "duplicate port %d/%s", p.Port, proto)
		case seenName[p.Name]:
			return nil, invalid(obj, field+".name", "duplicate port name %q", p.Name)
		}
		seenPort[portID{proto, p.Port}], seenName[p.Name] = true, true
		out = append(out, policy.ServicePort{Name: p.Name, Protocol: proto, Port: uint16(p.Port), NodePort: uint16(p.NodePort)})
	}
	return out, nil
}

func affinity(obj string, svc *corev1.Service) (uint32, error) {
	switch svc.Spec.SessionAffinity {
	case corev1.ServiceAffinityClientIP:
	case "", corev1.ServiceAffinityNone:
		return 0, nil
	default:
		return 0, invalid(obj, "spec.sessionAffinity", "must be None or ClientIP, got %q", svc.Spec.SessionAffinity)
	}
	cfg := svc.Spec.SessionAffinityConfig
	if cfg == nil || cfg.ClientIP == nil || cfg.ClientIP.TimeoutSeconds == nil {
		return defaultAffinityTimeout, nil
	}
	t := *cfg.ClientIP.TimeoutSeconds
	if t < 1 || t > 86400 {
		return 0, invalid(obj, "spec.sessionAffinityConfig.clientIP.timeoutSeconds", "must be 1-86400, got %d", t)
	}
	return uint32(t), nil
}
