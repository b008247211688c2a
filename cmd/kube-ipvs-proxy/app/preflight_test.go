package app

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// fakeCluster is an API server that serves one List of each kind the
// preflight reads, as JSON, and counts the requests.
type fakeCluster struct {
	services []corev1.Service
	slices   []discoveryv1.EndpointSlice
	nodes    []corev1.Node
	requests []string
}

func (c *fakeCluster) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.requests = append(c.requests, r.URL.Path+"?"+r.URL.RawQuery)
	var list any
	switch r.URL.Path {
	case "/api/v1/services":
		list = corev1.ServiceList{TypeMeta: metav1.TypeMeta{Kind: "ServiceList", APIVersion: "v1"}, Items: c.services}
	case "/apis/discovery.k8s.io/v1/endpointslices":
		list = discoveryv1.EndpointSliceList{TypeMeta: metav1.TypeMeta{Kind: "EndpointSliceList", APIVersion: "discovery.k8s.io/v1"}, Items: c.slices}
	case "/api/v1/nodes":
		list = corev1.NodeList{TypeMeta: metav1.TypeMeta{Kind: "NodeList", APIVersion: "v1"}, Items: c.nodes}
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list)
}

func testNode(name, ip string) corev1.Node {
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}}}
}

// testService is a ClusterIP Service with one TCP port per entry of ports.
func testService(name, clusterIP string, ports ...int32) corev1.Service {
	s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
		CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, len(name), 0, time.UTC))},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP}}}
	for i, p := range ports {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "p" + string(rune('a'+i)), Protocol: corev1.ProtocolTCP,
			Port: p, TargetPort: intstr.FromInt32(p)})
	}
	return s
}

// testSlice is a ready endpoint at ip on node for the Service's first port.
func testSlice(svc, ip, node string, port int32) discoveryv1.EndpointSlice {
	return discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: svc + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("pa"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(port)}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip}, NodeName: ptr.To(node),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
}

// cleanCluster: two nodes, one Service with an endpoint on each.
func cleanCluster() *fakeCluster {
	web := testSlice("web", "10.244.0.5", "node-a", 8080)
	web.Endpoints = append(web.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.244.1.5"}, NodeName: ptr.To("node-b"),
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	return &fakeCluster{
		services: []corev1.Service{testService("web", "10.96.0.10", 80)},
		slices:   []discoveryv1.EndpointSlice{web},
		nodes:    []corev1.Node{testNode("node-a", "192.168.0.1"), testNode("node-b", "192.168.0.2")},
	}
}

// goodNode is a node's root with everything the proxy needs loaded.
var goodNode = fstest.MapFS{
	"proc/sys/kernel/hostname":  {Data: []byte("node-a\n")},
	"proc/sys/kernel/osrelease": {Data: []byte("6.1.0-test\n")},
	"sys/module/ip_vs":          {Mode: fs.ModeDir | 0o555},
	"sys/module/ip_vs_rr":       {Mode: fs.ModeDir | 0o555},
	"sys/module/nf_tables":      {Mode: fs.ModeDir | 0o555},
	"sys/module/nf_conntrack":   {Mode: fs.ModeDir | 0o555},
}

// runPreflightOn runs the command line against c, with root as the
// host's file system, and returns the exit code and output.
func runPreflightOn(t *testing.T, c *fakeCluster, root fstest.MapFS, args ...string) (int, string) {
	t.Helper()
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	var out, errOut bytes.Buffer
	o, err := ParseFlags(append([]string{"--preflight", "--master", srv.URL, "--hostname-override", "node-a"}, args...), &errOut)
	if err == nil {
		err = o.Validate()
	}
	if err != nil {
		t.Fatalf("flags: %v", err)
	}
	code := Preflight(t.Context(), o, root, fakeForward{}, &out, &errOut)
	if errOut.Len() > 0 {
		t.Logf("stderr:\n%s", errOut.String())
	}
	return code, out.String()
}

// TestPreflightRules: each rule's finding, and the exit code it gives.
func TestPreflightRules(t *testing.T) {
	tests := []struct {
		name    string
		cluster func() *fakeCluster
		root    fstest.MapFS
		args    []string
		code    int
		want    []string // lines or parts of lines the report must have
	}{{
		name: "a clean cluster passes", cluster: cleanCluster, root: goodNode, code: ExitOK,
		want: []string{"preflight for node node-a: 1 Services (0 not proxied, as by kube-proxy), 1 EndpointSlices, 2 Nodes",
			"info    kernel: ip_vs loaded", "preflight PASS: 0 errors, 0 warnings"},
	}, {
		name: "a refused Service fails the preflight", code: ExitError, root: goodNode,
		cluster: func() *fakeCluster {
			c := cleanCluster()
			bad := testService("bad", "10.96.0.11", 80)
			bad.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicy("Nowhere"))
			c.services = append(c.services, bad)
			return c
		},
		want: []string{"refused:\n  ERROR   Service default/bad: ", "spec.internalTrafficPolicy", "not served",
			"preflight FAIL: 1 errors, 0 warnings: traffic kube-proxy serves would not be served"},
	}, {
		name: "a Service over its budget fails the preflight", code: ExitError, root: goodNode, cluster: func() *fakeCluster {
			c := cleanCluster()
			c.services = append(c.services, testService("big", "10.96.0.12", 80, 81))
			return c
		},
		args: []string{"--max-virtual-servers-per-service", "1"},
		want: []string{"budget:\n  ERROR   Service default/big: ", "[TooManyVirtualServers]", "preflight FAIL: 1 errors"},
	}, {
		name: "a conflict is reported as a warning", code: ExitOK, root: goodNode, cluster: conflictCluster,
		want: []string{"ownership:\n  warning Service default/web-b: ", "[VirtualServerConflict]", "preflight PASS: 0 errors, 1 warnings"},
	}, {
		// The preflight plans as the real mode and the dry run do
		// (planSnapshot): a Service not served still holds its ClusterIP.
		name: "an external IP on another proxy's Service's ClusterIP is refused", code: ExitOK, root: goodNode,
		cluster: func() *fakeCluster {
			c := cleanCluster()
			other, taker := testService("other", "10.96.0.30", 80), testService("taker", "10.96.0.31", 80)
			other.Labels = map[string]string{"service.kubernetes.io/service-proxy-name": "elsewhere"}
			taker.Spec.ExternalIPs = []string{"10.96.0.30"}
			c.services = append(c.services, other, taker)
			return c
		},
		want: []string{"Service default/taker: ", "10.96.0.30 is the ClusterIP of Service default/other", "[ExternalIPIsClusterIP]"},
	}, {
		name: "--strict fails on a warning", code: ExitError, root: goodNode, cluster: conflictCluster, args: []string{"--strict"},
		want: []string{"[VirtualServerConflict]", "preflight FAIL: 0 errors, 1 warnings: --strict fails on warnings"},
	}, {
		name: "eTP=Local without a local endpoint differs from kube-proxy", code: ExitOK, root: goodNode,
		cluster: func() *fakeCluster {
			c := cleanCluster()
			lb := testService("lb", "10.96.0.13", 80)
			lb.Spec.Type = corev1.ServiceTypeNodePort
			lb.Spec.Ports[0].NodePort = 30080
			lb.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			c.services = append(c.services, lb)
			c.slices = append(c.slices, testSlice("lb", "10.244.1.6", "node-b", 80))
			return c
		},
		want: []string{"traffic policy:\n  warning Service default/lb: eTP=Local, no local endpoint on this node (1 elsewhere)"},
	}, {
		name: "iTP=Local exposed with eTP=Cluster differs from kube-proxy", code: ExitOK, root: goodNode,
		cluster: func() *fakeCluster {
			c := cleanCluster()
			np := testService("np", "10.96.0.14", 80)
			np.Spec.Type = corev1.ServiceTypeNodePort
			np.Spec.Ports[0].NodePort = 30081
			np.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
			c.services = append(c.services, np)
			c.slices = append(c.slices, testSlice("np", "10.244.1.7", "node-b", 80))
			return c
		},
		want: []string{"warning Service default/np: iTP=Local, no local endpoint on this node (1 elsewhere)"},
	}, {
		name: "a node without ip_vs fails the preflight", code: ExitError, cluster: cleanCluster,
		root: without(goodNode, "sys/module/ip_vs"),
		want: []string{"ERROR   kernel: ip_vs is not loaded"},
	}, {
		name: "a scheduler the node cannot load fails the preflight", code: ExitError, cluster: cleanCluster,
		root: with(goodNode, "lib/modules/6.1.0-test/modules.dep", "kernel/net/netfilter/ipvs/ip_vs_rr.ko.xz:\n"),
		args: []string{"--ipvs-scheduler", "sed"},
		want: []string{"ERROR   kernel: scheduler sed: no module ip_vs_sed in /lib/modules/6.1.0-test"},
	}, {
		name: "a scheduler installed but not loaded passes", code: ExitOK, cluster: cleanCluster,
		root: with(goodNode, "lib/modules/6.1.0-test/modules.dep", "kernel/net/netfilter/ipvs/ip_vs_sed.ko.xz: kernel/net/netfilter/ipvs/ip_vs.ko.xz\n"),
		args: []string{"--ipvs-scheduler", "sed"},
		want: []string{"info    kernel: scheduler sed: ip_vs_sed installed"},
	}, {
		name: "the kernel is not checked off the node", code: ExitOK, cluster: cleanCluster, root: fstest.MapFS{},
		want: []string{"info    kernel: not checked"},
	}, {
		name: "the kernel is not checked on another Linux host, the operator's", code: ExitOK, cluster: cleanCluster,
		root: with(without(goodNode, "sys/module/ip_vs"), "proc/sys/kernel/hostname", "workstation\n"),
		want: []string{"info    kernel: not checked"},
	}, {
		name: "the kernel is checked on the node whose hostname is the short form of its FQDN name", code: ExitError,
		cluster: func() *fakeCluster {
			c := cleanCluster()
			c.nodes[0].Status.Addresses = append(c.nodes[0].Status.Addresses,
				corev1.NodeAddress{Type: corev1.NodeHostName, Address: "ip-192-168-0-1.internal"})
			return c
		},
		root: with(without(goodNode, "sys/module/ip_vs"), "proc/sys/kernel/hostname", "ip-192-168-0-1\n"),
		want: []string{"ERROR   kernel: ip_vs is not loaded"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out := runPreflightOn(t, tc.cluster(), tc.root, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("report lacks %q", w)
				}
			}
			if t.Failed() || testing.Verbose() {
				t.Logf("report:\n%s", out)
			}
		})
	}
}

// conflictCluster: two Services claim one external IP and port; the
// older, web-a, owns it.
func conflictCluster() *fakeCluster {
	c := cleanCluster()
	a, b := testService("web-a", "10.96.0.20", 80), testService("web-b", "10.96.0.21", 80)
	a.Spec.ExternalIPs, b.Spec.ExternalIPs = []string{"203.0.113.1"}, []string{"203.0.113.1"}
	c.services = append(c.services, a, b)
	return c
}

// TestPreflightListsOnce: each kind is listed once, without a watch.
func TestPreflightListsOnce(t *testing.T) {
	c := cleanCluster()
	if code, out := runPreflightOn(t, c, goodNode); code != ExitOK {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if len(c.requests) != 3 {
		t.Errorf("requests %q, want one list of each kind", c.requests)
	}
	for _, r := range c.requests {
		if strings.Contains(r, "watch=true") {
			t.Errorf("request %q watches", r)
		}
	}
}

// TestPreflightFlags: --strict needs --preflight, and --preflight reads
// the cluster, not --objects.
func TestPreflightFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--strict"}, "--strict needs --preflight"},
		{[]string{"--preflight", "--dry-run", "--objects", "x.yaml"}, "--preflight takes no --objects"},
		{[]string{"--preflight", "--cleanup"}, "--preflight takes no --cleanup"},
	} {
		code, _, errOut := run(t, append(tc.args, "--hostname-override", "n")...)
		if code != ExitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, stderr %q, want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

// TestPreflightKubeconfigWinsOverTheFile: with --preflight, --kubeconfig
// wins over the --config file's clientConnection.kubeconfig (kubeadm's
// points into the pod), without the notice that it is ignored.
func TestPreflightKubeconfigWinsOverTheFile(t *testing.T) {
	srv := httptest.NewServer(cleanCluster())
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	kubeconfig := writeFile(t, dir, "admin.conf", "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: "+srv.URL+"}\n"+
		"contexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {}\n")
	config := writeFile(t, dir, "config.conf", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\n"+
		"clientConnection:\n  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf\n")
	var out, errOut bytes.Buffer
	o, err := ParseFlags([]string{"--preflight", "--config", config, "--kubeconfig", kubeconfig, "--hostname-override", "node-a"}, &errOut)
	if err == nil {
		err = o.Validate()
	}
	if err != nil {
		t.Fatal(err)
	}
	if code := Preflight(t.Context(), o, goodNode, fakeForward{}, &out, &errOut); code != ExitOK {
		t.Errorf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if strings.Contains(errOut.String(), "ignoring --kubeconfig") {
		t.Errorf("stderr says --kubeconfig is ignored:\n%s", errOut.String())
	}
}

func with(m fstest.MapFS, name, data string) fstest.MapFS {
	out := fstest.MapFS{}
	for k, v := range m {
		out[k] = v
	}
	out[name] = &fstest.MapFile{Data: []byte(data)}
	return out
}

func without(m fstest.MapFS, name string) fstest.MapFS {
	out := fstest.MapFS{}
	for k, v := range m {
		if k != name {
			out[k] = v
		}
	}
	return out
}
