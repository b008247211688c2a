package app

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/fakeapi"
)

// TestNodeCIDRModeTakesTheNodesPodCIDRs: with detectLocalMode NodeCIDR
// the proxy waits for its Node's podCIDRs, as kube-proxy, reading the
// Node again every poll, and they take clusterCIDR's place for the
// engine and the data plane.
func TestNodeCIDRModeTakesTheNodesPodCIDRs(t *testing.T) {
	const poll = time.Second
	for _, tc := range []struct {
		name      string
		podCIDRs  []string // on the Node from the start
		late      []string // set while the proxy waits, then one poll passes
		stop      bool     // stopped while waiting
		want      []string
		wantError string
	}{
		{name: "the Node's podCIDRs replace clusterCIDR", podCIDRs: []string{"10.244.7.0/24", "fd00:244:7::/64"},
			want: []string{"10.244.7.0/24", "fd00:244:7::/64"}},
		{name: "the proxy waits until the Node has podCIDRs, reading it every poll", late: []string{"10.244.8.0/24"},
			want: []string{"10.244.8.0/24"}},
		{name: "stopped while waiting", stop: true, wantError: "waiting for node node-a's podCIDRs: context canceled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, _ := mustParse(t, "--hostname-override", "node-a", "--detect-local-mode", "NodeCIDR", "--cluster-cidr", "10.0.0.0/8")
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Spec: corev1.NodeSpec{PodCIDRs: tc.podCIDRs}}
			cs := fake.NewClientset(node)
			clk := testingclock.NewFakeClock(time.Unix(1000, 0))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			res := make(chan nodeCIDRResult, 1)
			go func() {
				rc, err := o.useNodeCIDRs(ctx, fakeapi.Client(cs), clk, poll)
				res <- nodeCIDRResult{rc, err}
			}()
			if tc.late != nil || tc.stop {
				waitingForPoll(t, clk, res)
			}
			if tc.late != nil {
				n := node.DeepCopy()
				n.Spec.PodCIDRs = tc.late
				if _, err := cs.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				clk.Step(poll - time.Nanosecond)
				if clk.Waiters() != 1 {
					t.Fatalf("the Node was read again before a poll had passed")
				}
				clk.Step(time.Nanosecond)
			}
			if tc.stop {
				cancel()
			}
			r := <-res
			if tc.wantError != "" {
				if r.err == nil || !errors.Is(r.err, context.Canceled) || !strings.Contains(r.err.Error(), tc.wantError) {
					t.Fatalf("error %v, want %q", r.err, tc.wantError)
				}
				return
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			if got := r.rc.Policy.ClusterCIDRs; !slices.Equal(got, tc.want) {
				t.Errorf("engine's cluster CIDRs %v, want %v", got, tc.want)
			}
			if got := len(r.rc.DataPlane.ClusterCIDRs); got != len(tc.want) {
				t.Errorf("data plane's cluster CIDRs %v, want %v", r.rc.DataPlane.ClusterCIDRs, tc.want)
			}
		})
	}
}

type nodeCIDRResult struct {
	rc  RunConfig
	err error
}

// waitingForPoll waits until useNodeCIDRs waits for its next poll on clk
// (it has read the Node and found no podCIDRs), failing if it returned
// instead.
func waitingForPoll(t *testing.T, clk *testingclock.FakeClock, res <-chan nodeCIDRResult) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for clk.Waiters() == 0 {
		select {
		case r := <-res:
			t.Fatalf("returned (cluster CIDRs %v, error %v) without waiting for the podCIDRs", r.rc.Policy.ClusterCIDRs, r.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("not waiting for a poll after 10 s")
		}
		runtime.Gosched()
	}
}
