package proxier

import (
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// ReasonInvalidAnnotation is the reason of the Warning Events emitted on
// Services with an invalid kube-ipvs-proxy.io annotation.
const ReasonInvalidAnnotation = "InvalidAnnotation"

const annotationFieldPrefix = "metadata.annotations[" + policy.AnnotationPrefix

// annotationEvents turns the engine's annotation warnings into Events on
// the Service, each at most once per service, annotation and message:
// an informer resync or an unrelated update repeats nothing, a changed
// message is emitted, and a warning that went away and comes back is
// emitted again.
type annotationEvents struct {
	mu       sync.Mutex
	recorder record.EventRecorder // nil: no Events
	seen     map[policy.ServiceKey]map[policy.Warning]struct{}
}

func newAnnotationEvents(rec record.EventRecorder) *annotationEvents {
	return &annotationEvents{recorder: rec, seen: map[policy.ServiceKey]map[policy.Warning]struct{}{}}
}

// annotationName returns the annotation a warning's field names, if it
// is one of ours.
func annotationName(field string) (string, bool) {
	if !strings.HasPrefix(field, annotationFieldPrefix) || !strings.HasSuffix(field, "]") {
		return "", false
	}
	return strings.TrimSuffix(strings.TrimPrefix(field, "metadata.annotations["), "]"), true
}

// warn emits the new annotation warnings of svc, whose conversion gave ws,
// and returns how many it emitted.
func (e *annotationEvents) warn(logger klog.Logger, svc *corev1.Service, ws []policy.Warning) int {
	key := serviceKey(svc.Namespace, svc.Name)
	now := map[policy.Warning]struct{}{}
	var fresh []policy.Warning
	e.mu.Lock()
	before := e.seen[key]
	for _, w := range ws {
		if _, ok := annotationName(w.Field); !ok {
			continue
		}
		if _, ok := before[w]; !ok {
			if _, dup := now[w]; !dup {
				fresh = append(fresh, w)
			}
		}
		now[w] = struct{}{}
	}
	if len(now) == 0 {
		delete(e.seen, key)
	} else {
		e.seen[key] = now
	}
	e.mu.Unlock()
	for _, w := range fresh {
		name, _ := annotationName(w.Field)
		logger.V(2).Info("Invalid annotation", "service", klog.KObj(svc), "annotation", name, "problem", w.Message)
		if e.recorder != nil {
			e.recorder.Eventf(svc, corev1.EventTypeWarning, ReasonInvalidAnnotation, "annotation %s: %s", name, w.Message)
		}
	}
	return len(fresh)
}

// forget drops a service's history, when it is deleted or not proxied.
func (e *annotationEvents) forget(key policy.ServiceKey) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.seen, key)
}
