package apiconv

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// The converters' tests convert through these, which also convert the
// trimmed object and fail unless both conversions agree: every case of
// TestService, TestEndpointSlice, TestNode and their invalid and fuzz
// variants proves that trimming loses nothing the converters read. Every
// EndpointSlice case also proves that converting through an Interner
// (EndpointSliceInterned, as the proxier does) gives what converting
// without one gives.

func checkedService(t *testing.T, svc *corev1.Service, proxyName string) (*policy.Service, error) {
	t.Helper()
	got, err := Service(svc, proxyName)
	trimmed, terr := Service(NewInterner().TrimService(svc), proxyName)
	// The engine reads only our annotations, and only those are kept.
	var want *policy.Service
	if got != nil {
		c := *got
		c.Annotations = keepKeys(c.Annotations, func(k string) bool { return strings.HasPrefix(k, policy.AnnotationPrefix) })
		want = &c
	}
	agree(t, "Service", want, err, trimmed, terr)
	return got, err
}

func checkedEndpointSlice(t *testing.T, s *discoveryv1.EndpointSlice) (*policy.EndpointSlice, error) {
	t.Helper()
	got, err := EndpointSlice(s)
	in := NewInterner()
	trimmed, terr := EndpointSlice(in.TrimEndpointSlice(s))
	agree(t, "EndpointSlice", got, err, trimmed, terr)
	interned, ierr := EndpointSliceInterned(in.TrimEndpointSlice(s), in)
	agree(t, "EndpointSliceInterned", got, err, interned, ierr)
	return got, err
}

func checkedNode(t *testing.T, n *corev1.Node) (*policy.Node, []policy.Warning, error) {
	t.Helper()
	got, ws, err := Node(n)
	trimmed, tws, terr := Node(NewInterner().TrimNode(n))
	agree(t, "Node", got, err, trimmed, terr)
	if diff := cmp.Diff(ws, tws); diff != "" {
		t.Errorf("Node warnings differ once trimmed (-original +trimmed):\n%s", diff)
	}
	return got, ws, err
}

func agree[T any](t *testing.T, what string, got T, err error, trimmed T, terr error) {
	t.Helper()
	if fmt.Sprint(err) != fmt.Sprint(terr) {
		t.Errorf("%s of the trimmed object: error %v, want %v", what, terr, err)
	}
	if diff := cmp.Diff(got, trimmed, cmpOpts...); diff != "" {
		t.Errorf("%s differs once trimmed (-original +trimmed):\n%s", what, diff)
	}
}

// fullService is a Service with what kubectl, controllers and the
// apiserver write besides what we read.
func fullService() *corev1.Service {
	svc := testService(
		withClusterIPs("10.0.0.10", "10.0.0.10", "fd00::10"),
		withIngress(corev1.LoadBalancerIngress{IP: "192.0.2.10", Hostname: "lb.example.com",
			Ports: []corev1.PortStatus{{Port: 80, Protocol: corev1.ProtocolTCP}}}),
		withAffinity(corev1.ServiceAffinityClientIP, nil),
		withLabel("app", "web"), withLabel(LabelServiceProxyName, "x"))
	svc.UID, svc.ResourceVersion, svc.Generation = "u-1", "42", 3
	svc.Annotations = map[string]string{
		corev1.LastAppliedConfigAnnotation: `{"apiVersion":"v1","kind":"Service"}`,
		policy.AnnotationScheduler:         "wrr",
		policy.AnnotationPrefix + "typo":   "x",
	}
	svc.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	svc.OwnerReferences = []metav1.OwnerReference{{Kind: "Gateway", Name: "gw"}}
	svc.Finalizers = []string{"service.kubernetes.io/load-balancer-cleanup"}
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	svc.Spec.Selector = map[string]string{"app": "web"}
	svc.Spec.Ports[0].TargetPort, svc.Spec.Ports[0].AppProtocol = intstr.FromString("http"), ptr("h2c")
	svc.Spec.Ports[0].NodePort = 30080
	svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	svc.Spec.LoadBalancerClass = ptr("example.com/lb")
	svc.Spec.ExternalTrafficPolicy, svc.Spec.HealthCheckNodePort = corev1.ServiceExternalTrafficPolicyLocal, 31000
	svc.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24"}
	svc.Status.Conditions = []metav1.Condition{{Type: "Ready"}}
	return svc
}

// fullSlice is a slice as the EndpointSlice controller writes it.
func fullSlice() *discoveryv1.EndpointSlice {
	s := testSlice(withEndpoints(discoveryv1.Endpoint{
		Addresses:  []string{"10.1.0.1", "10.1.0.99"},
		Conditions: discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)},
		Hostname:   ptr("web-0"), NodeName: ptr("node-a"), Zone: ptr("zone-1"),
		TargetRef:          &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: "web-0", UID: "p-1"},
		DeprecatedTopology: map[string]string{"topology.kubernetes.io/zone": "zone-1"},
		Hints:              &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-1"}}},
	}))
	s.UID, s.ResourceVersion, s.GenerateName = "u-2", "43", "web-"
	s.Labels[discoveryv1.LabelManagedBy] = "endpointslice-controller.k8s.io"
	s.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: "2026-01-01T00:00:00Z", "other": "x"}
	s.OwnerReferences = []metav1.OwnerReference{{Kind: "Service", Name: "web", UID: "u-1"}}
	s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}
	s.Ports[0].AppProtocol = ptr("http")
	return s
}

func TestTrimService(t *testing.T) {
	in := fullService()
	before := in.DeepCopy()
	got := NewInterner().TrimService(in)
	tests := []struct {
		name      string
		got, want any
	}{
		{"an annotation we read survives", got.Annotations[policy.AnnotationScheduler], "wrr"},
		{"an unknown kube-ipvs-proxy.io annotation survives, to be warned about", got.Annotations[policy.AnnotationPrefix+"typo"], "x"},
		{"other annotations go", len(got.Annotations), 2},
		{"the service-proxy-name label survives, other labels go", got.Labels, map[string]string{LabelServiceProxyName: "x"}},
		{"identity survives", []string{got.Namespace, got.Name, string(got.UID), got.ResourceVersion}, []string{"shop", "web", "u-1", "42"}},
		{"managed fields, owners, finalizers and generation go", []any{got.ManagedFields, got.OwnerReferences, got.Finalizers, got.Generation},
			[]any{[]metav1.ManagedFieldsEntry(nil), []metav1.OwnerReference(nil), []string(nil), int64(0)}},
		{"ports keep name, protocol, port and node port", got.Spec.Ports,
			[]corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080}}},
		{"selector, IP families and class go", []any{got.Spec.Selector, got.Spec.IPFamilies, got.Spec.LoadBalancerClass},
			[]any{map[string]string(nil), []corev1.IPFamily(nil), (*string)(nil)}},
		{"ingress keeps its IP and mode only", got.Status.LoadBalancer.Ingress, []corev1.LoadBalancerIngress{{IP: "192.0.2.10"}}},
		{"status conditions go", got.Status.Conditions, []metav1.Condition(nil)},
		{"the input is not modified", cmp.Diff(before, in), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	checkedService(t, in, "x")
}

func TestTrimEndpointSlice(t *testing.T) {
	in := fullSlice()
	before := in.DeepCopy()
	in2 := fullSlice()
	in2.Name = "web-2"
	interner := NewInterner()
	got, got2 := interner.TrimEndpointSlice(in), interner.TrimEndpointSlice(in2)
	e, e2 := got.Endpoints[0], got2.Endpoints[0]
	tests := []struct {
		name      string
		got, want any
	}{
		{"the service-name label survives, other labels go", got.Labels, map[string]string{LabelServiceName: "web"}},
		{"the trigger time survives, other annotations go", got.Annotations,
			map[string]string{corev1.EndpointsLastChangeTriggerTime: "2026-01-01T00:00:00Z"}},
		{"identity survives", []string{got.Namespace, got.Name, got.ResourceVersion}, []string{"shop", "web-abc12", "43"}},
		{"UID, owners, managed fields and generateName go", []any{got.UID, got.OwnerReferences, got.ManagedFields, got.GenerateName},
			[]any{types.UID(""), []metav1.OwnerReference(nil), []metav1.ManagedFieldsEntry(nil), ""}},
		{"only the first address is kept", e.Addresses, []string{"10.1.0.1"}},
		{"target ref, hostname and deprecated topology go", []any{e.TargetRef, e.Hostname, e.DeprecatedTopology},
			[]any{(*corev1.ObjectReference)(nil), (*string)(nil), map[string]string(nil)}},
		{"conditions, node, zone and hints survive", []any{*e.Conditions.Ready, *e.Conditions.Serving, *e.Conditions.Terminating, *e.NodeName, *e.Zone, e.Hints},
			[]any{true, true, false, "node-a", "zone-1", &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-1"}}}}},
		{"ports drop the app protocol", got.Ports[0].AppProtocol, (*string)(nil)},
		{"slices share node, zone, hints and conditions", []bool{e.NodeName == e2.NodeName, e.Zone == e2.Zone, e.Hints == e2.Hints,
			e.Conditions.Ready == e2.Conditions.Ready, got.Ports[0].Name == got2.Ports[0].Name}, []bool{true, true, true, true, true}},
		{"the input is not modified", cmp.Diff(before, in), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	checkedEndpointSlice(t, in)
}

func TestTrimNode(t *testing.T) {
	n := testNode(nodeAddr(corev1.NodeInternalIP, "10.0.1.1"))
	n.Labels = map[string]string{policy.LabelTopologyZone: "zone-1"}
	n.Annotations = map[string]string{"node.alpha.kubernetes.io/ttl": "0"}
	n.Spec.Taints = []corev1.Taint{{Key: "ToBeDeletedByClusterAutoscaler"}}
	n.Spec.PodCIDR = "10.244.0.0/24"
	n.Status.Images = []corev1.ContainerImage{{Names: []string{"registry.k8s.io/pause:3.10"}}}
	now := metav1.Now()
	n.DeletionTimestamp = &now
	got := NewInterner().TrimNode(n)
	want := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels, DeletionTimestamp: &now},
		Spec: corev1.NodeSpec{Taints: n.Spec.Taints}, Status: corev1.NodeStatus{Addresses: n.Status.Addresses}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("labels, taints, addresses and the deletion timestamp survive; the rest goes (-want +got):\n%s", diff)
	}
	checkedNode(t, n)
}

func TestTrimNodeMetadata(t *testing.T) {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "node-b", UID: types.UID("u"), ResourceVersion: "7",
		Labels: map[string]string{"rack": "r1"}, Annotations: map[string]string{"flannel.alpha.coreos.com/public-ip": "192.0.2.2"}}}
	got := NewInterner().TrimNodeMetadata(m)
	want := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "node-b", UID: "u", ResourceVersion: "7",
		Labels: map[string]string{"rack": "r1"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("labels survive, annotations go (-want +got):\n%s", diff)
	}
}

func TestInternerStartsAfreshWhenFull(t *testing.T) {
	in := NewInterner()
	a := in.String("node-a")
	for i := range maxInterned {
		in.String(fmt.Sprint("n-", i))
	}
	if n := len(in.strs); n > maxInterned {
		t.Fatalf("%d strings interned, want at most %d", n, maxInterned)
	}
	if got := in.String("node-a"); got != a {
		t.Fatalf("String = %q, want %q", got, a)
	}
	if _, ok := in.strs["n-0"]; ok {
		t.Errorf("the first strings are still interned after the table filled")
	}
}

func TestEndpointSliceSharesTrimmedHints(t *testing.T) {
	hinted := func(addr, zone string) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{addr},
			Hints: &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: zone}}}}
	}
	s := NewInterner().TrimEndpointSlice(testSlice(withEndpoints(hinted("10.1.0.1", "zone-1"), hinted("10.1.0.2", "zone-1"),
		hinted("10.1.0.3", "zone-2"))))
	got, err := checkedEndpointSlice(t, s)
	if err != nil {
		t.Fatal(err)
	}
	z := func(i int) []string { return got.Endpoints[i].ForZones() }
	if &z(0)[0] != &z(1)[0] || &z(0)[0] == &z(2)[0] {
		t.Errorf("endpoints with equal trimmed hints should share their zones, others not: %p %p %p", z(0), z(1), z(2))
	}
	if cap(z(0)) != 1 || z(2)[0] != "zone-2" {
		t.Errorf("shared zones %v (cap %d), %v", z(0), cap(z(0)), z(2))
	}
}
