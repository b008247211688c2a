package proxier

import (
	"fmt"
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// clusterWideReasons are the reasons of Warning Events about a Service
// that every node decides alike, from the Service and the cluster's other
// objects: every node would record the same Event. (A failure of this
// node's kernel, KernelError, is this node's and keeps its own Event.)
var clusterWideReasons = map[string]bool{
	ReasonInvalidAnnotation:             true,
	policy.ReasonVirtualServerConflict:  true,
	policy.ReasonClusterIPAddress:       true,
	policy.ReasonNodeAddress:            true,
	policy.ReasonNoTrackRefused:         true,
	policy.ReasonTooManyVirtualServers:  true,
	policy.ReasonInvalidAddress:         true,
	policy.ReasonRefusedAddress:         true,
	policy.ReasonDuplicateAddress:       true,
	policy.ReasonAddressFamilyNotServed: true,
}

// ClusterWideEventSink wraps the sink the proxy's Event broadcaster
// writes to so that a problem with a Service is one Event in the
// cluster, not one per node: a Warning Event with a cluster-wide reason
// is written under a name derived from the Service, the reason and the
// message, without this node as its source host, and the node that finds
// it already written (AlreadyExists, which the broadcaster does not
// retry) has nothing more to do. A message that names something of one
// node (its address) differs, and so is an Event of its own. The
// broadcaster still counts repetitions on the Event it wrote.
//
// The choice, of aggregating by name rather than electing a node to
// speak: a node knows no other Node (the proxy watches only its own), and
// a name is agreed on with no coordination.
func ClusterWideEventSink(sink record.EventSink) record.EventSink { return clusterWideSink{sink} }

type clusterWideSink struct{ record.EventSink }

func (s clusterWideSink) Create(ev *corev1.Event) (*corev1.Event, error) {
	if ev.Type == corev1.EventTypeWarning && ev.InvolvedObject.Kind == "Service" && clusterWideReasons[ev.Reason] {
		ev = ev.DeepCopy()
		ev.Name = clusterEventName(ev)
		ev.Source.Host = ""
	}
	return s.EventSink.Create(ev)
}

// clusterEventName is the Service's name and a 64-bit FNV-1a hash of the
// involved object, the reason and the message: the same on every node.
func clusterEventName(ev *corev1.Event) string {
	h := fnv.New64a()
	for _, s := range []string{ev.InvolvedObject.Namespace, ev.InvolvedObject.Name, string(ev.InvolvedObject.UID), ev.Reason, ev.Message} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return fmt.Sprintf("%s.%016x", ev.InvolvedObject.Name, h.Sum64())
}
