package app

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/fakeapi"
)

// TestNodeCIDRModeTakesTheNodesPodCIDRs: with detectLocalMode NodeCIDR
// the proxy waits for its Node's podCIDRs, as kube-proxy, and they take
// clusterCIDR's place for the engine and the data plane.
func TestNodeCIDRModeTakesTheNodesPodCIDRs(t *testing.T) {
	for _, tc := range []struct {
		name      string
		podCIDRs  []string // on the Node from the start; nil: set after 50 ms
		late      []string
		want      []string
		wantError string
	}{
		{name: "the Node's podCIDRs replace clusterCIDR", podCIDRs: []string{"10.244.7.0/24", "fd00:244:7::/64"},
			want: []string{"10.244.7.0/24", "fd00:244:7::/64"}},
		{name: "the proxy waits until the Node has podCIDRs", late: []string{"10.244.8.0/24"}, want: []string{"10.244.8.0/24"}},
		{name: "stopped while waiting", wantError: "waiting for node node-a's podCIDRs: context deadline exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, _ := mustParse(t, "--hostname-override", "node-a", "--detect-local-mode", "NodeCIDR", "--cluster-cidr", "10.0.0.0/8")
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Spec: corev1.NodeSpec{PodCIDRs: tc.podCIDRs}}
			cs := fake.NewClientset(node)
			if tc.late != nil {
				go func() {
					time.Sleep(50 * time.Millisecond)
					n := node.DeepCopy()
					n.Spec.PodCIDRs = tc.late
					_, _ = cs.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
				}()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			rc, err := o.useNodeCIDRs(ctx, fakeapi.Client(cs), 10*time.Millisecond)
			if tc.wantError != "" {
				if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("error %v, want %q", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := rc.Policy.ClusterCIDRs; !slices.Equal(got, tc.want) {
				t.Errorf("engine's cluster CIDRs %v, want %v", got, tc.want)
			}
			if got := len(rc.DataPlane.ClusterCIDRs); got != len(tc.want) {
				t.Errorf("data plane's cluster CIDRs %v, want %v", rc.DataPlane.ClusterCIDRs, tc.want)
			}
		})
	}
}
