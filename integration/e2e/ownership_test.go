//go:build !integration

package e2e

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/cmd/kube-ipvs-proxy/app"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/apiserver"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// programmed replays the recorded calls: each virtual server key the data
// plane holds now, with its service.
func (r *recorder) programmed() map[string]string {
	owner := map[string]string{}
	for k, vs := range r.programmedVS() {
		owner[k] = vs.Service.String()
	}
	return owner
}

// programmedVS replays the recorded calls: each virtual server the data
// plane holds now, by key; a key two services were given in one Apply
// has the Service "CONFLICT first second".
func (r *recorder) programmedVS() map[string]policy.VirtualServer {
	held := map[string]policy.VirtualServer{}
	for _, c := range r.snapshot() {
		if c.full {
			clear(held)
			for _, vs := range c.plan.VirtualServers {
				held[vs.Key().String()] = vs
			}
			continue
		}
		// Release before claim: an Apply replaces its services' virtual
		// servers as one change.
		for _, sp := range c.changes {
			for k, vs := range held {
				if vs.Service == sp.Service {
					delete(held, k)
				}
			}
		}
		for _, sp := range c.changes {
			for _, vs := range sp.VirtualServers {
				if prev, ok := held[vs.Key().String()]; ok {
					prev.Service = policy.ServiceKey{Namespace: "CONFLICT " + prev.Service.String(), Name: vs.Service.String()}
					held[vs.Key().String()] = prev
					continue
				}
				held[vs.Key().String()] = vs
			}
		}
	}
	return held
}

// proxyToken applies deploy/base's ServiceAccount and RBAC and returns
// the proxy's token.
func proxyToken(t *testing.T, c *apiserver.Cluster) string {
	t.Helper()
	base := filepath.Join("..", "..", "deploy", "base")
	c.Apply(t, filepath.Join(base, "serviceaccount.yaml"), filepath.Join(base, "clusterrole.yaml"),
		filepath.Join(base, "clusterrolebinding.yaml"))
	token, err := c.ServiceAccountToken("kube-system", "kube-ipvs-proxy")
	if err != nil {
		t.Fatalf("service account token: %v", err)
	}
	return token
}

// startProxy runs the proxy's watch loop against c as the DaemonSet
// would (deploy/base's ServiceAccount and RBAC), with a recording data
// plane.
func startProxy(t *testing.T, c *apiserver.Cluster, extra ...string) *recorder {
	t.Helper()
	return runProxy(t, c, proxyToken(t, c), extra...)
}

// runProxy runs the watch loop with the token; flags in extra follow the
// defaults and win over them.
func runProxy(t *testing.T, c *apiserver.Cluster, token string, extra ...string) *recorder {
	t.Helper()
	return runProxyLogging(t, c, token, io.Discard, extra...)
}

// runProxyLogging is runProxy with the proxy's log (klog's text format,
// V(0)) written to log.
func runProxyLogging(t *testing.T, c *apiserver.Cluster, token string, log io.Writer, extra ...string) *recorder {
	t.Helper()
	args := append([]string{"--kubeconfig", c.KubeconfigForToken(token), "--hostname-override", nodeName,
		"--cluster-cidr", "10.244.0.0/16", "--ipvs-sync-period", "1h",
		"--metrics-bind-address", freeAddr(t), "--healthz-bind-address", freeAddr(t)}, extra...)
	opts, err := app.ParseFlags(args, io.Discard)
	if err == nil {
		err = opts.Validate()
	}
	if err != nil {
		t.Fatalf("flags: %v", err)
	}
	dp := &recorder{}
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(log), textlogger.Verbosity(0)))
	ctx, stop := context.WithCancel(klog.NewContext(context.Background(), logger))
	done := make(chan error, 1)
	go func() { done <- app.Watch(ctx, opts, dp.open, io.Discard) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	})
	return dp
}

// createNode creates a Node with its status (an InternalIP).
func createNode(t *testing.T, cs kubernetes.Interface, name, zone, ip string) {
	t.Helper()
	ctx := context.Background()
	created, err := cs.CoreV1().Nodes().Create(ctx, node(name, zone, ip), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = node(name, zone, ip).Status
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func waitEvent(t *testing.T, cs kubernetes.Interface, ns, name, reason, contains string) {
	t.Helper()
	waitFor(t, reason+" Event on "+ns+"/"+name, func() bool {
		evs, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Reason == reason && e.InvolvedObject.Name == name && strings.Contains(e.Message, contains) {
				t.Logf("event on %s/%s: %s %s: %s", ns, name, e.Type, e.Reason, e.Message)
				return true
			}
		}
		return false
	})
}

func tcpService(ns, name, clusterIP string, port int32, mutate ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{ClusterIP: clusterIP, Ports: []corev1.ServicePort{
			{Name: "p", Protocol: corev1.ProtocolTCP, Port: port}}},
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

// TestOwnershipThroughTheAPI: what a namespace editor can do to other
// Services' and the node's addresses, through a real apiserver: an
// external IP naming another Service's ClusterIP takes none of its ports,
// one naming a load-balancer IP loses it to the LoadBalancer Service
// however old it is, one naming a node's address is served there without
// binding it (or, with --refuse-node-address-external-ips, not served),
// an Event says why each time, the sync never fails, and a ClusterIP
// released and claimed again in one batch goes to the new Service.
func TestOwnershipThroughTheAPI(t *testing.T) {
	c := apiserver.Start(t, apiserver.Options{})
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(c.AdminConfig())
	for _, ns := range []string{"aaa", "kube-system", "team-a", "team-b"} {
		_, _ = admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	}
	createNode(t, admin, nodeName, "zone-a", "192.0.2.1")
	svcs := func(ns string) func(*corev1.Service) (*corev1.Service, error) {
		return func(s *corev1.Service) (*corev1.Service, error) {
			return admin.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{})
		}
	}
	if _, err := svcs("kube-system")(tcpService("kube-system", "kube-dns", "10.96.0.10", 53)); err != nil {
		t.Fatal(err)
	}
	token := proxyToken(t, c)
	dp := runProxy(t, c, token, "--ipvs-min-sync-period", "0s")
	waitFor(t, "the first sync", func() bool { return len(dp.snapshot()) > 0 })

	t.Run("an external IP on another Service's ClusterIP takes none of its ports", func(t *testing.T) {
		grab := tcpService("aaa", "grab", "10.96.0.99", 53, func(s *corev1.Service) {
			s.Spec.ExternalIPs = []string{"10.96.0.10"}
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443})
		})
		if _, err := svcs("aaa")(grab); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "aaa/grab's ClusterIP to be programmed", func() bool { return dp.programmed()["10.96.0.99:443/TCP"] == "aaa/grab" })
		if got := dp.programmed()["10.96.0.10:53/TCP"]; got != "kube-system/kube-dns" {
			t.Errorf("10.96.0.10:53/TCP is programmed for %q, want kube-system/kube-dns", got)
		}
		if got, ok := dp.programmed()["10.96.0.10:443/TCP"]; ok {
			t.Errorf("10.96.0.10:443/TCP, an unused port of kube-dns's ClusterIP, is programmed for %s", got)
		}
		waitEvent(t, admin, "aaa", "grab", policy.ReasonClusterIPAddress, "10.96.0.10 is the ClusterIP of Service kube-system/kube-dns")
	})

	t.Run("a load-balancer IP beats an older external IP squatting on it", func(t *testing.T) {
		squat := tcpService("team-a", "squat", "", 80, func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"203.0.113.50"} })
		if _, err := svcs("team-a")(squat); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "team-a/squat's external IP", func() bool { return dp.programmed()["203.0.113.50:80/TCP"] == "team-a/squat" })
		time.Sleep(time.Second) // the squatter is older by a creationTimestamp second
		lb, err := svcs("team-b")(tcpService("team-b", "lb", "", 80, func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer }))
		if err != nil {
			t.Fatal(err)
		}
		lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.50"}}
		if _, err := admin.CoreV1().Services("team-b").UpdateStatus(ctx, lb, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the load-balancer IP to go to team-b/lb", func() bool { return dp.programmed()["203.0.113.50:80/TCP"] == "team-b/lb" })
		waitEvent(t, admin, "team-a", "squat", policy.ReasonVirtualServerConflict, "owned by Service team-b/lb (LoadBalancer)")
	})

	t.Run("an external IP that is a node's address is served there, unbound", func(t *testing.T) {
		s := tcpService("aaa", "on-node", "", 22, func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.0.2.1", "203.0.113.9"} })
		if _, err := svcs("aaa")(s); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "aaa/on-node's external IPs", func() bool {
			return dp.programmed()["203.0.113.9:22/TCP"] == "aaa/on-node" && dp.programmed()["192.0.2.1:22/TCP"] == "aaa/on-node"
		})
		if vs := dp.programmedVS()["192.0.2.1:22/TCP"]; vs.Bound() {
			t.Errorf("192.0.2.1:22/TCP (this node's address) is to be bound on kube-ipvs0: %+v", vs)
		}
		if vs := dp.programmedVS()["203.0.113.9:22/TCP"]; !vs.Bound() {
			t.Errorf("203.0.113.9:22/TCP is not to be bound on kube-ipvs0: %+v", vs)
		}
		waitEvent(t, admin, "aaa", "on-node", policy.ReasonNodeAddress, "192.0.2.1 is a node's address; served")
		if err := admin.CoreV1().Services("aaa").Delete(ctx, "on-node", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("with --refuse-node-address-external-ips, a node's address is not served", func(t *testing.T) {
		refusing := runProxy(t, c, token, "--ipvs-min-sync-period", "0s", "--refuse-node-address-external-ips")
		s := tcpService("aaa", "refused", "", 2222, func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.0.2.1", "203.0.113.9"} })
		if _, err := svcs("aaa")(s); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "aaa/refused's other external IP", func() bool { return refusing.programmed()["203.0.113.9:2222/TCP"] == "aaa/refused" })
		if got, ok := refusing.programmed()["192.0.2.1:2222/TCP"]; ok {
			t.Errorf("192.0.2.1:2222/TCP (a node's address) is programmed for %s", got)
		}
		waitEvent(t, admin, "aaa", "refused", policy.ReasonNodeAddress, "192.0.2.1 is a node's address; not served")
	})

	t.Run("an eTP=Local NodePort sends in-cluster clients via the ClusterIP", func(t *testing.T) {
		s := tcpService("aaa", "local-np", "10.96.0.77", 8080, func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			s.Spec.Ports[0].NodePort = 30777
		})
		if _, err := svcs("aaa")(s); err != nil {
			t.Fatal(err)
		}
		var via string
		waitFor(t, "aaa/local-np's NodePort with its internal route", func() bool {
			for _, c := range dp.snapshot() {
				for _, sp := range c.changes {
					for _, vs := range sp.VirtualServers {
						if vs.Kind == policy.KindNodePort && vs.Port == 30777 && vs.Address.Is4() { // on the host's addresses
							via = vs.InternalVia.String()
						}
					}
				}
			}
			return via != ""
		})
		if via != "10.96.0.77:8080" {
			t.Errorf("NodePort :30777 routes in-cluster clients via %s, want 10.96.0.77:8080", via)
		}
	})

	t.Run("a ClusterIP deleted and created again goes to the new Service", func(t *testing.T) {
		if _, err := svcs("aaa")(tcpService("aaa", "old", "10.96.0.50", 80)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "aaa/old", func() bool { return dp.programmed()["10.96.0.50:80/TCP"] == "aaa/old" })
		// Another service claiming it as an external IP is refused while
		// it is a ClusterIP.
		if _, err := svcs("aaa")(tcpService("aaa", "next", "10.96.0.51", 80, func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"10.96.0.50"} })); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "aaa/next", func() bool { return dp.programmed()["10.96.0.51:80/TCP"] == "aaa/next" })
		if err := admin.CoreV1().Services("aaa").Delete(ctx, "old", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the external IP claim to take over", func() bool { return dp.programmed()["10.96.0.50:80/TCP"] == "aaa/next" })
		// The ClusterIP comes back: it wins again, at once.
		var err error
		for range 50 { // the allocator releases the IP asynchronously
			if _, err = svcs("aaa")(tcpService("aaa", "new", "10.96.0.50", 80)); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("create aaa/new on 10.96.0.50: %v", err)
		}
		waitFor(t, "aaa/new", func() bool { return dp.programmed()["10.96.0.50:80/TCP"] == "aaa/new" })
		for k, s := range dp.programmed() {
			if strings.HasPrefix(s, "CONFLICT") {
				t.Errorf("%s was given to two services in one Apply: %s", k, s)
			}
		}
	})
}

// TestPlanWarningsThroughTheAPI: the warnings a tenant's Service earns
// reach the apiserver as Events, small and on the right Services: a
// NOTRACK Service sharing an endpoint with a tracked one is served
// tracked, with an Event saying why, a
// 200 KiB annotation value is quoted cut short; and a health check node
// port counts a local pod serving two ports once (kube-proxy's
// LocalReadyEndpoints by unique IP).
func TestPlanWarningsThroughTheAPI(t *testing.T) {
	c := apiserver.Start(t, apiserver.Options{})
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(c.AdminConfig())
	createNode(t, admin, nodeName, "zone-a", "192.0.2.1")
	mk := func(s *corev1.Service) {
		t.Helper()
		if _, err := admin.CoreV1().Services(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", s.Name, err)
		}
	}
	mkSlice := func(svc string, ports []int32, addrs ...string) {
		t.Helper()
		s := webSlice()
		s.Name, s.Labels = svc+"-1", map[string]string{"kubernetes.io/service-name": svc}
		s.Ports = nil
		for i, p := range ports {
			s.Ports = append(s.Ports, discoveryEndpointPort("p"+string(rune('0'+i)), p))
		}
		for _, a := range addrs {
			s.Endpoints = append(s.Endpoints, readyEndpoint(a, nodeName))
		}
		if _, err := admin.DiscoveryV1().EndpointSlices("default").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create slice of %s: %v", svc, err)
		}
	}
	twoPorts := func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{{Name: "p0", Protocol: corev1.ProtocolTCP, Port: 80}, {Name: "p1", Protocol: corev1.ProtocolTCP, Port: 81}}
	}
	mk(tcpService("default", "dns", "10.96.0.53", 53, func(s *corev1.Service) {
		s.Annotations = map[string]string{policy.AnnotationNoTrack: "true"}
		s.Spec.Ports[0].Name = "p0"
	}))
	mk(tcpService("default", "dns-tcp", "10.96.0.54", 53, func(s *corev1.Service) { s.Spec.Ports[0].Name = "p0" }))
	mkSlice("dns", []int32{5353}, "10.244.1.5")
	mkSlice("dns-tcp", []int32{5353}, "10.244.1.5")
	mk(tcpService("default", "huge", "10.96.0.60", 80, func(s *corev1.Service) {
		s.Annotations = map[string]string{policy.AnnotationScheduler: strings.Repeat("x", 200<<10)}
	}))
	hcPort := int32(32555)
	mk(tcpService("default", "lb", "10.96.0.70", 80, twoPorts, func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = hcPort
	}))
	mkSlice("lb", []int32{8080, 8081}, "10.244.1.7")

	dp := startProxy(t, c, "--ipvs-min-sync-period", "0s", "--nodeport-addresses", "127.0.0.0/8")

	t.Run("a NOTRACK Service sharing an endpoint with a tracked one is served tracked", func(t *testing.T) {
		waitEvent(t, admin, "default", "dns", policy.ReasonNoTrackRefused, "tracked Service default/dns-tcp")
		waitFor(t, "default/dns's ClusterIP", func() bool { _, ok := dp.programmedVS()["10.96.0.53:53/TCP"]; return ok })
		if vs := dp.programmedVS()["10.96.0.53:53/TCP"]; vs.NoTrack {
			t.Errorf("10.96.0.53:53/TCP is NOTRACK, sharing 10.244.1.5:5353 with tracked default/dns-tcp")
		}
	})
	t.Run("a 200 KiB annotation value is quoted cut short", func(t *testing.T) {
		waitEvent(t, admin, "default", "huge", "InvalidAnnotation", "(204800 bytes)")
		evs, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == "huge" && len(e.Message) > 256 {
				t.Errorf("Event %s on default/huge is %d bytes long", e.Reason, len(e.Message))
			}
		}
	})
	t.Run("the health check counts a pod serving two ports once", func(t *testing.T) {
		url := "http://127.0.0.1:" + strconv.Itoa(int(hcPort)) + "/"
		var body string
		var weight string
		waitFor(t, "the health check node port to answer 200", func() bool {
			resp, err := http.Get(url)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			body, weight = string(b), resp.Header.Get("X-Load-Balancing-Endpoint-Weight")
			return resp.StatusCode == 200
		})
		if !strings.Contains(body, `"localEndpoints": 1`) || weight != "1" {
			t.Errorf("health check: weight %q body %s; want localEndpoints 1 and weight 1", weight, body)
		}
		t.Logf("health check: X-Load-Balancing-Endpoint-Weight %s, %s", weight, strings.TrimSpace(body))
	})
}

func discoveryEndpointPort(name string, port int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: ptr(name), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(port)}
}

func readyEndpoint(addr, nodeName string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)},
		NodeName: ptr(nodeName)}
}
