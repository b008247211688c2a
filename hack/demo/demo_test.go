//go:build !integration

package demo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/apiserver"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/vme2e"
)

// TestDemo starts the apiserver with the examples and boots the VM half.
func TestDemo(t *testing.T) {
	if os.Getenv("KIP_DEMO") != "1" {
		t.Skip("boots a VM: set KIP_DEMO=1 (make demo)")
	}
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	h := vme2e.StartHost(t, repo, apiserver.Options{
		ExtraArgs: []string{"--service-cluster-ip-range=10.96.0.0/16,fd00:96::/112"}})
	admin := kubernetes.NewForConfigOrDie(h.Cluster.AdminConfig())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}
	if _, err := admin.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	examples, err := filepath.Glob(filepath.Join(repo, "examples", "*.yaml"))
	if err != nil || len(examples) == 0 {
		t.Fatalf("examples/*.yaml: %v", err)
	}
	ctx := context.Background()
	var rest []string
	for _, f := range examples {
		if filepath.Base(f) == "nodes.yaml" {
			if err := createNodes(ctx, admin, f); err != nil {
				t.Fatal(err)
			}
			continue
		}
		rest = append(rest, f)
	}
	h.Cluster.Apply(t, rest...)
	for _, f := range rest {
		if err := writeServiceStatus(ctx, admin, f); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("created the objects of %d example files", len(examples))
	plan := filepath.Join(repo, "examples", "plans", "node-a.json")
	console := h.RunVM(t, "./hack/demo/", []string{plan + ":" + vmPlan}, []string{envPlan + "=" + vmPlan}, "-test.v")
	if !strings.Contains(console, "--- PASS: TestDemoInVM") {
		t.Fatalf("the VM run did not pass TestDemoInVM")
	}
}
