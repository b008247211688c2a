package proxier

import (
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// maxEventMessage bounds an Event's message: the apiserver stores every
// node's Event, so a message quoting user input must stay small.
const maxEventMessage = 1024

// planEvents turns the engine's plan warnings about Services (a virtual
// server owned by another Service, an external IP that is a node's
// address, a destination shared by a NOTRACK and a tracked Service) into
// a log line and a Warning Event on the Service, once per service and
// warning while it lasts. Per-service warnings come with each recomputed
// service's plan; cross-service ones with each whole plan. Only the sync
// goroutine calls it.
type planEvents struct {
	recorder record.EventRecorder // nil: log only
	own      map[policy.ServiceKey]map[policy.Warning]struct{}
	cross    map[policy.ServiceKey]map[policy.Warning]struct{}
}

func newPlanEvents(rec record.EventRecorder) *planEvents {
	return &planEvents{recorder: rec, own: map[policy.ServiceKey]map[policy.Warning]struct{}{},
		cross: map[policy.ServiceKey]map[policy.Warning]struct{}{}}
}

// services reports the recomputed services' own warnings. A service
// without warnings (or deleted) forgets its history.
func (e *planEvents) services(logger klog.Logger, plans []policy.ServicePlan) {
	for _, sp := range plans {
		e.own[sp.Service] = e.emit(logger, sp.Service, e.own[sp.Service], sp.Warnings)
		if len(e.own[sp.Service]) == 0 {
			delete(e.own, sp.Service)
		}
	}
}

// warned returns, for services, only what it reads of plans: the service
// and warnings of each plan with warnings, or whose service had some
// (which it forgets), in a new list. A full sync keeps this instead of
// every service's plan while the writers program the assembled plan, so
// that the per-service virtual server lists are garbage by then.
func (e *planEvents) warned(plans []policy.ServicePlan) []policy.ServicePlan {
	var out []policy.ServicePlan
	for i := range plans {
		sp := &plans[i]
		if _, had := e.own[sp.Service]; had || len(sp.Warnings) > 0 {
			out = append(out, policy.ServicePlan{Service: sp.Service, Warnings: sp.Warnings})
		}
	}
	return out
}

// plan reports a whole plan's cross-service warnings: those of services
// no longer named are forgotten.
func (e *planEvents) plan(logger klog.Logger, ws []policy.Warning) {
	bySvc := map[policy.ServiceKey][]policy.Warning{}
	for _, w := range ws {
		if w.Reason == policy.ReasonNoTrackSharedDestination {
			bySvc[w.Service] = append(bySvc[w.Service], w)
		}
	}
	next := make(map[policy.ServiceKey]map[policy.Warning]struct{}, len(bySvc))
	for k, list := range bySvc {
		next[k] = e.emit(logger, k, e.cross[k], list)
	}
	e.cross = next
}

// emit logs and records the warnings not in before, and returns the set
// now in force.
func (e *planEvents) emit(logger klog.Logger, key policy.ServiceKey, before map[policy.Warning]struct{}, ws []policy.Warning) map[policy.Warning]struct{} {
	now := make(map[policy.Warning]struct{}, len(ws))
	for _, w := range ws {
		if w.Reason == "" || w.Service != key {
			continue
		}
		if _, seen := now[w]; seen {
			continue
		}
		now[w] = struct{}{}
		if _, old := before[w]; old {
			continue
		}
		logger.Info("Service plan warning", "service", klog.KRef(key.Namespace, key.Name), "reason", w.Reason,
			"object", w.Object, "field", w.Field, "problem", w.Message)
		if e.recorder != nil {
			ref := &corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: key.Namespace, Name: key.Name}
			msg := w.Field + ": " + w.Message
			if w.Object != "Service "+key.String() {
				// About another object of the Service (an EndpointSlice):
				// the Event on the Service names it.
				msg = w.Object + ": " + msg
			}
			e.recorder.Event(ref, corev1.EventTypeWarning, w.Reason, truncate(msg, maxEventMessage))
		}
	}
	return now
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
