package proxier

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// TestOneConflictIsOneEventInTheCluster: three nodes warning about the
// same conflict write one Event between them, with no node as its
// source; a failure of each node's kernel stays one Event per node.
func TestOneConflictIsOneEventInTheCluster(t *testing.T) {
	cs := fake.NewClientset()
	ref := &corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: "default", Name: "grab"}
	nodes := []string{"node-a", "node-b", "node-c"}
	written := make(chan string, 2*len(nodes))
	for _, node := range nodes {
		b := record.NewBroadcaster()
		sink := ClusterWideEventSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
		b.StartRecordingToSink(writtenSink{sink, written})
		defer b.Shutdown()
		rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kube-ipvs-proxy", Host: node})
		rec.Event(ref, corev1.EventTypeWarning, policy.ReasonVirtualServerConflict, "spec.ports[http]: ExternalIP virtual server 203.0.113.7:80/TCP is owned by Service default/a")
		rec.Event(ref, corev1.EventTypeWarning, ipvs.ReasonKernelError, "scheduler mh: module not found")
	}
	// Every node's two writes have returned, the second conflict's and
	// the third's included (refused, or written again if the rule were
	// broken): what the API holds now is all there will be.
	deadline := time.After(10 * time.Second)
	for range 2 * len(nodes) {
		select {
		case <-written:
		case <-deadline:
			t.Fatal("the Events were not all written within 10 s")
		}
	}
	list, err := cs.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]corev1.Event{}
	for _, e := range list.Items {
		got[e.Reason] = append(got[e.Reason], e)
	}
	if n := len(got[ipvs.ReasonKernelError]); n != 3 {
		t.Errorf("%d KernelError Events, want 3 (one per node)", n)
	}
	conflicts := got[policy.ReasonVirtualServerConflict]
	if len(conflicts) != 1 {
		t.Fatalf("%d VirtualServerConflict Events, want 1 for the three nodes", len(conflicts))
	}
	if h := conflicts[0].Source.Host; h != "" {
		t.Errorf("the cluster-wide Event's source host is %q, want none", h)
	}
}

// writtenSink says on written, after each Create has returned (written
// or refused), the reason of the Event.
type writtenSink struct {
	record.EventSink
	written chan<- string
}

func (s writtenSink) Create(ev *corev1.Event) (*corev1.Event, error) {
	out, err := s.EventSink.Create(ev)
	s.written <- ev.Reason
	return out, err
}
