//go:build !integration

package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/apiserver"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
)

// call is one data plane call: a Resync (full) or an Apply.
type call struct {
	full    bool
	plan    policy.Plan
	changes []policy.ServicePlan
}

// recorder is a data plane that records what the proxy asks of it.
type recorder struct {
	proxier.NopDataPlane // nothing else to fake
	mu                   sync.Mutex
	calls                []call
}

func (r *recorder) Apply(c []policy.ServicePlan) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call{changes: c})
	return nil
}

func (r *recorder) Resync(p policy.Plan) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call{full: true, plan: p})
	return nil
}

func (r *recorder) NeedsResync() bool { return false }

func (r *recorder) open() (proxier.DataPlaneWriter, func(), error) { return r, func() {}, nil }

func (r *recorder) snapshot() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// waitFor polls cond for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < 30*time.Second {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
	return 0
}

// freeAddr returns a loopback address with a free port.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// getQuiet is get without failing the test, for polling.
func getQuiet(addr string) (int, string) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func ptr[T any](v T) *T { return &v }

func node(name, zone, ip string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/hostname": name, policy.LabelTopologyZone: zone}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}},
	}
}

// startWithWeb starts an apiserver that holds this test's Node (zone-a)
// and the web Service; it returns the cluster and its admin client.
func startWithWeb(t *testing.T) (*apiserver.Cluster, *kubernetes.Clientset) {
	t.Helper()
	c := apiserver.Start(t, apiserver.Options{})
	admin := kubernetes.NewForConfigOrDie(c.AdminConfig())
	ctx := context.Background()
	if _, err := admin.CoreV1().Nodes().Create(ctx, node(nodeName, "zone-a", "192.0.2.1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Services("default").Create(ctx, webService(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return c, admin
}

func webService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{
			{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
}

// endpoint is an address on a node, hinted for a zone.
type endpoint struct{ addr, node, zone string }

// webSlice is what the EndpointSlice controller writes, hints included.
func webSlice(eps ...endpoint) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "web-abc12", Namespace: "default",
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(8080))}},
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{e.addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)},
			NodeName: ptr(e.node), Zone: ptr(e.zone),
			Hints: &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: e.zone}}},
		})
	}
	return s
}

// destinations renders a service plan's ClusterIP destinations.
func destinations(sp policy.ServicePlan) []string {
	var out []string
	for _, vs := range sp.VirtualServers {
		if vs.Kind == policy.KindClusterIP {
			for _, d := range vs.Destinations {
				out = append(out, d.Address.String())
			}
		}
	}
	return out
}

func planDestinations(p policy.Plan, service string) []string {
	sp := policy.ServicePlan{}
	for _, vs := range p.VirtualServers {
		if vs.Service.String() == service {
			sp.VirtualServers = append(sp.VirtualServers, vs)
		}
	}
	return destinations(sp)
}
