package app

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// FuzzDryRunManifest writes whole manifests (Nodes, Services and their
// EndpointSlices) from the fuzzer's bytes, runs the dry run over them as
// node-a, and checks what must hold of any plan, whatever an editor wrote:
//   - no virtual server is planned twice (the kernel would refuse the
//     second, failing the Service on every node);
//   - no virtual server or destination is on an address no Service may
//     take (loopback, unspecified, link-local, multicast, broadcast);
//   - a Service's ClusterIP is its own: no virtual server of another
//     Service sits on it, whatever that Service's proxy or validity;
//   - no Node's address is bound on the dummy interface.
//
// The addresses come from a pool built to collide: the Nodes' own
// addresses, the Services' ClusterIPs, one address written several ways,
// legacy forms, the refused classes and garbage.
func FuzzDryRunManifest(f *testing.F) {
	f.Add([]byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77})
	f.Add([]byte{0x03, 0x0b, 0x0b, 0x40, 0x81, 0x02, 0x09, 0x09, 0x09, 0x10})
	f.Add([]byte{0xff, 0xfe, 0x01, 0x05, 0x06, 0x07, 0x08, 0x0c, 0x0d, 0x0e, 0x0f, 0x13})
	f.Add([]byte{0x02, 0x00, 0x00, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a})
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		m := generateManifest(data)
		path := filepath.Join(dir, "objects.yaml")
		if err := os.WriteFile(path, m.encode(t), 0o644); err != nil {
			t.Fatal(err)
		}
		opts, err := ParseFlags([]string{"--dry-run", "--objects", path, "--hostname-override", "node-a",
			"--cluster-cidr", "10.244.0.0/16,fd00:244::/32"}, os.Stderr)
		if err == nil {
			err = opts.Validate()
		}
		if err != nil {
			t.Fatalf("options: %v", err)
		}
		res, err := DryRun(opts)
		if err != nil {
			t.Fatalf("dry run: %v", err)
		}
		checkPlanInvariants(t, m, res.Plan)
	})
}

// fuzzAddresses is the pool every address of a generated manifest is drawn
// from. Indexes 0-3 are the Nodes' addresses and 4-7 the first
// Services' ClusterIPs, so that external and load-balancer IPs and
// endpoints collide with them.
var fuzzAddresses = []string{
	"192.168.0.1", "192.168.0.2", "2001:db8:1::1", "2001:db8:1::2", // node-a, node-b
	"10.96.0.10", "10.96.0.11", "fd00:96::10", "fd00:96::11", // ClusterIPs of services 0 and 1
	"203.0.113.5", "203.0.113.5", "2001:db8::5", "2001:db8:0:0::5", // one address twice, IPv6 two ways
	"010.001.002.003", "::ffff:203.0.113.9", "203.0.113.9", // legacy forms
	"127.0.0.1", "0.0.0.0", "::", "::1", "169.254.169.254", "fe80::1", "224.0.0.1", "ff02::1", "255.255.255.255", // refused
	"not-an-ip", "", "10.244.1.5", "10.244.2.7", "fd00:244::5", // garbage, pods
}

// fuzzManifest is a generated manifest and what the checks need of it.
type fuzzManifest struct {
	nodes    []*corev1.Node
	services []*corev1.Service
	slices   []*discoveryv1.EndpointSlice
}

// byteReader hands out the fuzzer's bytes, then zeros.
type byteReader struct {
	b []byte
	i int
}

func (r *byteReader) next() byte {
	if r.i >= len(r.b) {
		return 0
	}
	r.i++
	return r.b[r.i-1]
}

func (r *byteReader) addr() string { return fuzzAddresses[int(r.next())%len(fuzzAddresses)] }

func (r *byteReader) addrs(max int) []string {
	var out []string
	for n := int(r.next()) % (max + 1); n > 0; n-- {
		out = append(out, r.addr())
	}
	return out
}

func generateManifest(data []byte) fuzzManifest {
	r := &byteReader{b: data}
	var m fuzzManifest
	for i, addrs := range [][]string{{"192.168.0.1", "2001:db8:1::1"}, {"192.168.0.2", "2001:db8:1::2"}} {
		n := &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%c", 'a'+i)}}
		for _, a := range addrs {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
		}
		m.nodes = append(m.nodes, n)
	}
	created := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	for i := range 1 + int(r.next())%4 {
		flags := r.next()
		s := &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%d", i), Namespace: "ns", CreationTimestamp: created}}
		s.Spec.ClusterIPs = []string{fmt.Sprintf("10.96.0.%d", 10+i)}
		if flags&1 != 0 {
			s.Spec.ClusterIPs = append(s.Spec.ClusterIPs, fmt.Sprintf("fd00:96::%d", 10+i))
		}
		s.Spec.ClusterIP = s.Spec.ClusterIPs[0]
		if flags&2 != 0 {
			s.Labels = map[string]string{"service.kubernetes.io/service-proxy-name": "other"}
		}
		s.Spec.Type = corev1.ServiceTypeClusterIP
		if flags&4 != 0 {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			for _, a := range r.addrs(3) {
				s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: a})
			}
		}
		if flags&8 != 0 {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}
		s.Spec.ExternalIPs = r.addrs(4)
		for p := range 1 + int(flags>>4)%3 {
			sp := corev1.ServicePort{Name: fmt.Sprintf("p%d", p), Protocol: corev1.ProtocolTCP, Port: int32(80 + p)}
			if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
				sp.NodePort = int32(30080 + 10*i + p)
			}
			s.Spec.Ports = append(s.Spec.Ports, sp)
		}
		if flags&0x40 != 0 {
			s.Annotations = map[string]string{"kube-ipvs-proxy.io/notrack": "true"}
		}
		m.services = append(m.services, s)
		m.slices = append(m.slices, fuzzSlice(r, s))
	}
	return m
}

// fuzzSlice is an EndpointSlice of s whose endpoints' addresses come from
// the pool; addresses of the other family are the apiserver's to refuse,
// and are left in on purpose.
func fuzzSlice(r *byteReader, s *corev1.Service) *discoveryv1.EndpointSlice {
	sl := &discoveryv1.EndpointSlice{TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Name + "-x", Namespace: s.Namespace,
			Labels: map[string]string{discoveryv1.LabelServiceName: s.Name}},
		AddressType: discoveryv1.AddressTypeIPv4}
	for _, p := range s.Spec.Ports {
		name, port, proto := p.Name, int32(8080), corev1.ProtocolTCP
		sl.Ports = append(sl.Ports, discoveryv1.EndpointPort{Name: &name, Port: &port, Protocol: &proto})
	}
	for _, a := range r.addrs(4) {
		node := []string{"node-a", "node-b"}[r.next()%2]
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, NodeName: &node})
	}
	return sl
}

func (m fuzzManifest) encode(t *testing.T) []byte {
	var docs []string
	add := func(o any) {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	for _, n := range m.nodes {
		add(n)
	}
	for _, s := range m.services {
		add(s)
	}
	for _, s := range m.slices {
		add(s)
	}
	return []byte(strings.Join(docs, "\n---\n"))
}

func checkPlanInvariants(t *testing.T, m fuzzManifest, plan policy.Plan) {
	t.Helper()
	clusterIPOwner := map[netip.Addr]string{}
	for _, s := range m.services {
		for _, c := range s.Spec.ClusterIPs {
			clusterIPOwner[netip.MustParseAddr(c)] = s.Namespace + "/" + s.Name
		}
	}
	nodeAddr := map[netip.Addr]bool{}
	for _, n := range m.nodes {
		for _, a := range n.Status.Addresses {
			nodeAddr[netip.MustParseAddr(a.Address)] = true
		}
	}
	for i, vs := range plan.VirtualServers {
		if i > 0 && plan.VirtualServers[i-1].Key().Compare(vs.Key()) >= 0 {
			t.Fatalf("virtual server %s planned twice (or out of order), for %s and %s",
				vs.Key(), plan.VirtualServers[i-1].Service, vs.Service)
		}
		if refusedAddress(vs.Address) {
			t.Fatalf("virtual server %s of %s is on an address no Service may take", vs.Key(), vs.Service)
		}
		if owner, ok := clusterIPOwner[vs.Address]; ok && (vs.Service.String() != owner || vs.Kind != policy.KindClusterIP) {
			t.Fatalf("virtual server %s (%s of %s) is on the ClusterIP of %s", vs.Key(), vs.Kind, vs.Service, owner)
		}
		if nodeAddr[vs.Address] && vs.Bound() {
			t.Fatalf("virtual server %s of %s binds a Node's address", vs.Key(), vs.Service)
		}
		for _, d := range vs.Destinations {
			if refusedAddress(d.Address) {
				t.Fatalf("virtual server %s of %s has destination %s, an address no endpoint may have", vs.Key(), vs.Service, d.Address)
			}
		}
	}
}

// refusedAddress reports the classes of address that are never a
// Service's or an endpoint's: loopback, unspecified, link-local,
// multicast and the IPv4 broadcast address.
func refusedAddress(a netip.Addr) bool {
	return a.IsLoopback() || a.IsUnspecified() || a.IsLinkLocalUnicast() || a.IsMulticast() ||
		a == netip.AddrFrom4([4]byte{255, 255, 255, 255})
}
