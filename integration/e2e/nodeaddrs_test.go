//go:build !integration

package e2e

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/apiconv"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/apiserver"
)

// TestEveryNodeAndServiceIsWatchedAgainstARealAPIServer: with deploy/base's
// RBAC and the apiserver's own selectors, the proxy (node-a) learns every
// Node's addresses and every Service's ClusterIP, another proxy's too: an
// external IP that is node-b's InternalIP is programmed unbound, and one
// equal to another proxy's Service's ClusterIP is not programmed; node-b's
// address moving away binds its old one. node-b's addresses are none of
// this host's (an address of the host is served unbound whatever the
// Nodes say).
func TestEveryNodeAndServiceIsWatchedAgainstARealAPIServer(t *testing.T) {
	c := apiserver.Start(t, apiserver.Options{})
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(c.AdminConfig())
	createNode(t, admin, nodeName, "zone-a", "192.0.2.1")
	createNode(t, admin, "node-b", "zone-b", "100.64.0.21")
	theirs := webService()
	theirs.Name, theirs.Spec.ClusterIP = "theirs", "10.96.0.40"
	theirs.Labels = map[string]string{apiconv.LabelServiceProxyName: "other-proxy"}
	ext := webService()
	ext.Name, ext.Spec.ClusterIP, ext.Spec.ExternalIPs = "ext", "10.96.0.41", []string{"100.64.0.21", "203.0.113.9", "10.96.0.40"}
	for _, s := range []*corev1.Service{theirs, ext} {
		if _, err := admin.CoreV1().Services("default").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dp := startProxy(t, c, "--ipvs-min-sync-period", "0s")

	external := func() map[string]string {
		out := map[string]string{}
		for k, vs := range dp.programmedVS() {
			if vs.Service.Name == "ext" && vs.Kind == "ExternalIP" {
				out[k] = "bound"
				if !vs.Bound() {
					out[k] = "unbound"
				}
			}
		}
		return out
	}
	want := map[string]string{"100.64.0.21:80/TCP": "unbound", "203.0.113.9:80/TCP": "bound"}
	waitFor(t, "node-b's address served unbound, another proxy's ClusterIP not served", func() bool { return equalMaps(external(), want) })
	t.Logf("ext's external IPs programmed: %v", external())

	n, err := admin.CoreV1().Nodes().Get(ctx, "node-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "100.64.0.22"}}
	if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want["100.64.0.21:80/TCP"] = "bound"
	waitFor(t, "100.64.0.21 bound once node-b's address moved", func() bool { return equalMaps(external(), want) })
	t.Logf("after node-b moved to 100.64.0.22: %v", external())
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
