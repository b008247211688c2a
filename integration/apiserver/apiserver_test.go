//go:build !integration

// Host-only tests (they start processes, they do not touch the kernel).
// The !integration constraint keeps this package out of the VM lab, whose
// runner builds every package that has tests under -tags integration.

package apiserver_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/apiserver"
)

const ns = "kip-test"

func TestAPIServer(t *testing.T) {
	start := time.Now()
	c := apiserver.Start(t, apiserver.Options{})
	t.Logf("etcd + kube-apiserver ready at %s in %v", c.URL(), time.Since(start).Round(time.Millisecond))
	ctx := t.Context()
	admin := kubernetes.NewForConfigOrDie(c.AdminConfig())

	c.Apply(t, "testdata/rbac.yaml")
	if _, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, "kip-test-config", metav1.GetOptions{}); err != nil {
		t.Fatalf("Apply did not create the ConfigMap: %v", err)
	}
	svc := createServiceAndSlice(ctx, t, admin)

	token, err := c.ServiceAccountToken(ns, "reader")
	if err != nil {
		t.Fatal(err)
	}
	reader := clientFromKubeconfig(t, c.KubeconfigForToken(token))

	t.Run("token can list services", func(t *testing.T) {
		waitListServices(ctx, t, reader)
	})
	t.Run("token cannot create services", func(t *testing.T) {
		_, err := reader.CoreV1().Services(ns).Create(ctx, service("forbidden"), metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("create service with the reader's token: got %v, want Forbidden", err)
		}
	})
	t.Run("token cannot read endpointslices", func(t *testing.T) {
		_, err := reader.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("list endpointslices with the reader's token: got %v, want Forbidden", err)
		}
	})

	t.Run("state survives an apiserver restart", func(t *testing.T) {
		if err := c.Stop(); err != nil {
			t.Fatal(err)
		}
		if _, err := reader.CoreV1().Services(ns).List(ctx, metav1.ListOptions{}); err == nil {
			t.Fatal("list services succeeded while the apiserver was stopped")
		}
		restart := time.Now()
		if err := c.Restart(); err != nil {
			t.Fatal(err)
		}
		t.Logf("kube-apiserver restarted in %v", time.Since(restart).Round(time.Millisecond))
		got, err := admin.CoreV1().Services(ns).Get(ctx, svc.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("service after restart: %v", err)
		}
		if got.UID != svc.UID || got.Spec.ClusterIP != svc.Spec.ClusterIP {
			t.Fatalf("service after restart: uid %s clusterIP %s, want %s %s", got.UID, got.Spec.ClusterIP, svc.UID, svc.Spec.ClusterIP)
		}
		// The token was signed before the restart with the same key: it
		// still authenticates, and RBAC still applies.
		waitListServices(ctx, t, reader)
	})

	t.Run("a saved etcd seeds another cluster with its objects", func(t *testing.T) {
		seed := t.TempDir() + "/seed"
		if err := c.SaveEtcd(seed); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.CoreV1().Services(ns).Get(ctx, svc.Name, metav1.GetOptions{}); err != nil {
			t.Fatalf("the saved cluster does not serve again: %v", err)
		}
		other := apiserver.Start(t, apiserver.Options{EtcdSeed: seed})
		got, err := kubernetes.NewForConfigOrDie(other.AdminConfig()).CoreV1().Services(ns).Get(ctx, svc.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("service in the seeded cluster: %v", err)
		}
		if got.UID != svc.UID || got.Spec.ClusterIP != svc.Spec.ClusterIP {
			t.Fatalf("service in the seeded cluster: uid %s clusterIP %s, want %s %s", got.UID, got.Spec.ClusterIP, svc.UID, svc.Spec.ClusterIP)
		}
	})
}

// TestKubernetesServiceEndpoints: with a non-loopback advertise address
// the apiserver's lease reconciler publishes the kubernetes Service's
// EndpointSlice (advertise address, secure port), as in a real cluster.
// 203.0.113.10 is TEST-NET-3 (RFC 5737): only written, never dialed.
func TestKubernetesServiceEndpoints(t *testing.T) {
	c := apiserver.Start(t, apiserver.Options{AdvertiseAddress: "203.0.113.10"})
	ctx := t.Context()
	admin := kubernetes.NewForConfigOrDie(c.AdminConfig())
	svc, err := admin.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != "10.96.0.1" {
		t.Errorf("kubernetes service cluster IP %s, want 10.96.0.1", svc.Spec.ClusterIP)
	}
	port, err := strconv.Atoi(c.URL()[strings.LastIndex(c.URL(), ":")+1:])
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		slice, err := admin.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
		if err == nil && len(slice.Endpoints) == 1 && len(slice.Ports) == 1 &&
			slice.Endpoints[0].Addresses[0] == "203.0.113.10" && *slice.Ports[0].Port == int32(port) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("EndpointSlice default/kubernetes: want 203.0.113.10:%d; got %+v, %v", port, slice, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createServiceAndSlice creates Service kip-test/web and an EndpointSlice
// for it with one ready endpoint, as the admin.
func createServiceAndSlice(ctx context.Context, t *testing.T, admin kubernetes.Interface) *corev1.Service {
	t.Helper()
	svc, err := admin.CoreV1().Services(ns).Create(ctx, service("web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service: %v", err)
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		t.Fatalf("service got no cluster IP: %q", svc.Spec.ClusterIP)
	}
	ready := true
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "web-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{"10.244.1.2"},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			NodeName:   ptr("node-a"),
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080)), Protocol: ptr(corev1.ProtocolTCP)}},
	}
	if _, err := admin.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create endpointslice: %v", err)
	}
	return svc
}

func service(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{
				Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080),
			}},
		},
	}
}

// waitListServices lists services with cs until it sees kip-test/web; the
// RBAC authorizer learns new bindings from an informer, so the first
// requests after the binding may still be forbidden.
func waitListServices(ctx context.Context, t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, s := range list.Items {
				if s.Name == "web" {
					return
				}
			}
			err = errors.New("service web not in the list")
		}
		if time.Now().After(deadline) {
			t.Fatalf("list services with the reader's token: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func clientFromKubeconfig(t *testing.T, path string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("load kubeconfig %s: %v", path, err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

func ptr[T any](v T) *T { return &v }
