//go:build !integration

package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/apiserver"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/kubeclient"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
)

// TestNodesAgainstARealAPIServer runs the sync loop against a real
// apiserver: a Node whose status carries a hostname as an ExternalIP (the
// apiserver accepts it) still gets its NodePorts on its valid addresses,
// and a later valid change of it is applied; toggling a Service's
// topology-keys annotation starts the watch of all Nodes once.
func TestNodesAgainstARealAPIServer(t *testing.T) {
	c := apiserver.Start(t, apiserver.Options{})
	ctx := context.Background()
	cfg := c.AdminConfig()
	admin := kubernetes.NewForConfigOrDie(cfg)
	n := node(nodeName, "zone-a", "192.0.2.1")
	created, err := admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "node-a.example.com"},
		{Type: corev1.NodeInternalIP, Address: "192.0.2.1"}}
	if created, err = admin.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("the apiserver refused a hostname as ExternalIP: %v", err)
	}
	svc := webService()
	svc.Spec.Type, svc.Spec.Ports[0].NodePort = corev1.ServiceTypeNodePort, 30080
	if _, err := admin.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	dp := &recorder{}
	client, err := kubeclient.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := proxier.New(proxier.Config{NodeName: nodeName, SyncPeriod: time.Hour, NodeWatchLinger: 3 * time.Second,
		Client: client, MetadataClient: metadata.NewForConfigOrDie(cfg), DataPlane: dp})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	// web's NodePort virtual servers after the last call carrying web.
	nodePorts := func() []string {
		var vss []policy.VirtualServer
		for _, c := range dp.snapshot() {
			if c.full {
				vss = c.plan.VirtualServers
			}
			for _, sp := range c.changes {
				if sp.Service.Name == "web" {
					vss = sp.VirtualServers
				}
			}
		}
		var out []string
		for _, vs := range vss {
			if vs.Service == (policy.ServiceKey{Namespace: "default", Name: "web"}) && vs.Kind == policy.KindNodePort {
				out = append(out, vs.Key().String())
			}
		}
		return out
	}
	waitFor(t, "the NodePort on the InternalIP", func() bool {
		np := nodePorts()
		return len(np) == 1 && np[0] == "192.0.2.1:30080/TCP"
	})
	// A valid change next to the bad address is applied.
	created.Status.Addresses = append(created.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.1"})
	if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the NodePort on the new ExternalIP too", func() bool { return len(nodePorts()) == 2 })

	// Toggle the topology-keys annotation three times.
	for i := range 6 {
		cur, err := admin.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Annotations = nil
		if i%2 == 0 {
			cur.Annotations = map[string]string{policy.AnnotationTopologyKeys: policy.LabelTopologyZone}
		}
		if _, err := admin.CoreV1().Services("default").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if s := p.Stats(); s.NodeInformerStarts != 1 || s.NodeInformerStops != 0 || !s.NodeInformer {
		t.Errorf("after 3 toggles: %d starts, %d stops, running %v; want 1 start, still running", s.NodeInformerStarts,
			s.NodeInformerStops, s.NodeInformer)
	}
	waitFor(t, "the watch stopped after lingering", func() bool { s := p.Stats(); return !s.NodeInformer })
	if s := p.Stats(); s.NodeInformerStarts != 1 || s.NodeInformerStops != 1 {
		t.Errorf("%d starts, %d stops; want 1 and 1", s.NodeInformerStarts, s.NodeInformerStops)
	}
}
