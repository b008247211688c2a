package benchscale

import (
	"bytes"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The workload's shape. Service i (0 ≤ i < Services) is svc-NNNNN in
// namespace bench-(i%Namespaces), ClusterIP 10.96.(10+i/250).(1+i%250),
// port http 80/TCP → 8080; every tenth (i%10 == 5) also has dns 53/UDP →
// 5353, and every tenth (i%10 == 0) is a NodePort (the apiserver
// allocates the port). Its one EndpointSlice holds PerService ready
// endpoints 10.(128+j).(i>>8).(i&255) on other nodes, except that one
// service in a hundred has its first endpoint on this node (the nft
// hairpin set). Churn replaces the last endpoint with
// 10.(200+gen).(i>>8).(i&255), gen < Generations.
const (
	PerService  = 10
	Namespaces  = 10
	Generations = 50
	// MaxServices keeps the NodePorts (one in ten) inside NodePortFirst
	// to NodePortLast and the ClusterIPs below NewServiceNet.
	MaxServices = 50000
	// NodePortFirst and NodePortLast are the apiserver's
	// --service-node-port-range: wider than its default 30000-32767, which
	// holds the NodePorts of 27,670 services, so that 50,000 fit. The
	// proxies are told nothing of it: they program what the apiserver
	// allocated.
	NodePortFirst, NodePortLast = 30000, 39999
	// MaxNewServices is how many services the service churn may create.
	MaxNewServices = 250

	NodeName = "node-a"
	// ConfigPath and KubeconfigPath are where the DaemonSet mounts the
	// proxy's ConfigMap (deploy/base); the VM gets them there too.
	ConfigPath     = "/var/lib/kube-ipvs-proxy/config.conf"
	KubeconfigPath = "/var/lib/kube-ipvs-proxy/kubeconfig.conf"
	GuestAddr      = "10.0.2.15" // the guest's eth0 (vme2e), the only NodePort address
	ClusterCIDR    = "10.128.0.0/9"
	HTTPPort       = 80
	DNSPort        = 53
	httpTarget     = 8080
	dnsTarget      = 5353
	// NewServiceNet's third octet holds the ClusterIPs and endpoint
	// addresses of the services the service churn creates.
	NewServiceNet = 250
)

// Workload is the cluster the harness loads into the apiserver and then
// changes through it.
type Workload struct {
	Services int
}

// Validate reports a size the address plan cannot hold.
func (w Workload) Validate() error {
	if w.Services < 1 || w.Services > MaxServices {
		return fmt.Errorf("services %d: want 1 to %d", w.Services, MaxServices)
	}
	return nil
}

// Namespace is service i's namespace.
func Namespace(i int) string { return fmt.Sprintf("bench-%d", i%Namespaces) }

// Name is service i's name.
func Name(i int) string { return fmt.Sprintf("svc-%05d", i) }

// ClusterIP is service i's cluster IP.
func ClusterIP(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 96, byte(10 + i/250), byte(1 + i%250)})
}

func hasDNS(i int) bool     { return i%10 == 5 }
func isNodePort(i int) bool { return i%10 == 0 }

// Service is service i.
func (w Workload) Service(i int) *corev1.Service {
	return service(Namespace(i), Name(i), ClusterIP(i), hasDNS(i), isNodePort(i))
}

// NewService is the c-th service the service churn creates (ClusterIP
// 10.96.250.(c+1), port http only).
func NewService(c int) *corev1.Service {
	return service(Namespace(c), fmt.Sprintf("new-%03d", c), NewClusterIP(c), false, false)
}

// NewClusterIP is the c-th new service's cluster IP.
func NewClusterIP(c int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 96, NewServiceNet, byte(c + 1)})
}

func service(ns, name string, ip netip.Addr, dns, nodePort bool) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: ip.String(), Ports: []corev1.ServicePort{
			{Name: "http", Protocol: corev1.ProtocolTCP, Port: HTTPPort, TargetPort: intstr.FromInt32(httpTarget)}}}}
	if dns {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "dns", Protocol: corev1.ProtocolUDP,
			Port: DNSPort, TargetPort: intstr.FromInt32(dnsTarget)})
	}
	if nodePort {
		s.Spec.Type = corev1.ServiceTypeNodePort
	}
	return s
}

// Slice is service i's EndpointSlice with its last endpoint at
// generation gen (-1: the initial address, LastEndpoint(i, -1)).
func (w Workload) Slice(i, gen int) *discoveryv1.EndpointSlice {
	var eps []discoveryv1.Endpoint
	for j := range PerService {
		addr := endpointAddr(i, j)
		if j == PerService-1 {
			addr = LastEndpoint(i, gen)
		}
		node := fmt.Sprintf("node-%03d", 1+(i+j)%100)
		if j == 0 && i%100 == 0 {
			node = NodeName
		}
		eps = append(eps, endpoint(addr, node))
	}
	return slice(Namespace(i), Name(i), eps, hasDNS(i))
}

// NewSlice is the c-th new service's EndpointSlice.
func NewSlice(c int) *discoveryv1.EndpointSlice {
	var eps []discoveryv1.Endpoint
	for j := range PerService {
		eps = append(eps, endpoint(netip.AddrFrom4([4]byte{10, byte(128 + j), NewServiceNet, byte(c)}), fmt.Sprintf("node-%03d", 1+j)))
	}
	s := NewService(c)
	return slice(s.Namespace, s.Name, eps, false)
}

// LastEndpoint is the address of service i's last endpoint at generation
// gen; -1 is the initial one.
func LastEndpoint(i, gen int) netip.Addr {
	if gen < 0 {
		return endpointAddr(i, PerService-1)
	}
	return netip.AddrFrom4([4]byte{10, byte(200 + gen%Generations), byte(i >> 8), byte(i)})
}

func endpointAddr(i, j int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(128 + j), byte(i >> 8), byte(i)})
}

func endpoint(addr netip.Addr, node string) discoveryv1.Endpoint {
	ready := true
	return discoveryv1.Endpoint{Addresses: []string{addr.String()}, NodeName: &node,
		Conditions: discoveryv1.EndpointConditions{Ready: &ready}}
}

func slice(ns, svc string, eps []discoveryv1.Endpoint, dns bool) *discoveryv1.EndpointSlice {
	port := func(name string, proto corev1.Protocol, p int32) discoveryv1.EndpointPort {
		return discoveryv1.EndpointPort{Name: &name, Protocol: &proto, Port: &p}
	}
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc + "-bench",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{port("http", corev1.ProtocolTCP, httpTarget)},
		Endpoints:   eps,
	}
	if dns {
		s.Ports = append(s.Ports, port("dns", corev1.ProtocolUDP, dnsTarget))
	}
	return s
}

// Expected is what the kernel must hold once the proxy has programmed
// the workload: IPVS virtual servers and destinations, and the addresses
// on kube-ipvs0. The apiserver's kubernetes Service (10.96.0.1:443, no
// endpoints: the lab apiserver publishes none) adds one virtual server.
type Expected struct {
	VirtualServers, Destinations, BoundAddresses int
}

// Expected counts the workload's kernel objects.
func (w Workload) Expected() Expected {
	vs := w.Services + 1
	for i := range w.Services {
		if hasDNS(i) {
			vs++
		}
		if isNodePort(i) {
			vs++ // one NodePort address: the guest's eth0
		}
	}
	return Expected{VirtualServers: vs, Destinations: (vs - 1) * PerService, BoundAddresses: w.Services + 1}
}

// Pick is the service the k-th change of a series touches: a stride
// through the services, so that consecutive changes hit different ones
// and every proxy measured sees the same sequence.
func (w Workload) Pick(k, offset int) int { return (k*7919 + offset) % w.Services }

// intoFirstDocument adds a line of kube-proxy's configuration to a config
// file: to its first document, before our own KubeIPVSProxyConfiguration
// if one follows (kube-proxy reads only the first, and we refuse its
// fields in ours).
func intoFirstDocument(b []byte, line string) []byte {
	first, rest, two := bytes.Cut(b, []byte("\n---\n"))
	out := make([]byte, 0, len(b)+len(line)+8)
	out = append(append(append(out, bytes.TrimRight(first, "\n")...), '\n'), line...)
	out = append(out, '\n')
	if two {
		out = append(append(out, "---\n"...), rest...)
	}
	return out
}
