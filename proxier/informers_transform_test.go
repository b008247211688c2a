package proxier

import (
	"k8s.io/client-go/tools/cache"
	"net/netip"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

const lastApplied = corev1.LastAppliedConfigAnnotation

func TestTrimObject(t *testing.T) {
	mf := []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	svc := service("web", "10.96.0.10", annotated(lastApplied, "{}"), annotated(policy.AnnotationScheduler, "wrr"))
	svc.ManagedFields = mf
	sl := slice("web-1", "web", ep{"10.1.0.1", testNode})
	sl.Endpoints[0].TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: "web-0"}
	n := node(testNode, "192.0.2.1", map[string]string{"rack": "r1"})
	n.Annotations = map[string]string{"a": "b"}
	meta := nodeMeta("node-b", map[string]string{"rack": "r2"})
	meta.Annotations = map[string]string{"a": "b"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{"a": "b"}, ManagedFields: mf}}
	tests := []struct {
		name  string
		in    any
		check func(out any) any // what should hold, rendered for a diff
		want  any
	}{
		{"a Service keeps our annotations only", svc,
			func(o any) any { return o.(*corev1.Service).Annotations }, map[string]string{policy.AnnotationScheduler: "wrr"}},
		{"a Service loses its managed fields", svc,
			func(o any) any { return len(o.(*corev1.Service).ManagedFields) }, 0},
		{"an EndpointSlice is held converted", sl,
			func(o any) any {
				c := o.(*convertedSlice)
				return []any{c.name, c.resourceVersion, len(c.conv.Endpoints), c.err}
			},
			[]any{"web-1", "", 1, error(nil)}},
		{"this Node keeps its labels and loses its annotations", n,
			func(o any) any { return []any{o.(*corev1.Node).Labels, o.(*corev1.Node).Annotations} },
			[]any{map[string]string{"rack": "r1"}, map[string]string(nil)}},
		{"another Node's metadata keeps its labels and loses its annotations", meta,
			func(o any) any { m := o.(*metav1.PartialObjectMetadata); return []any{m.Labels, m.Annotations} },
			[]any{map[string]string{"rack": "r2"}, map[string]string(nil)}},
		{"another kind only loses its managed fields", pod,
			func(o any) any { p := o.(*corev1.Pod); return []any{p.Annotations, len(p.ManagedFields)} },
			[]any{map[string]string{"a": "b"}, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := trimObject(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, tc.check(out)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			again, err := trimObject(out)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(out, again, cmp.AllowUnexported(convertedSlice{}, identity{}), cmpopts.EquateComparable(netip.Addr{})); diff != "" {
				t.Errorf("not idempotent (-once +twice):\n%s", diff)
			}
		})
	}
	if svc.Annotations[lastApplied] != "{}" || sl.Endpoints[0].TargetRef == nil || n.Annotations == nil {
		t.Errorf("trimObject modified its input")
	}
}

// TestInformerCachesHoldTrimmedObjects: the Services informer's cache
// (read for Events) holds the trimmed Service, and the plan is what the
// untrimmed one gives.
func TestInformerCachesHoldTrimmedObjects(t *testing.T) {
	svc := service("web", "10.96.0.10", annotated(lastApplied, "{}"), annotated(policy.AnnotationScheduler, "wrr"))
	svc.Labels = map[string]string{"app": "web"}
	tp := newTestProxier(t, nil, svc, slice("web-1", "web", ep{"10.1.0.1", testNode}))
	tp.start(t)
	obj, ok, err := tp.services.GetByKey("default/web")
	if err != nil || !ok {
		t.Fatalf("default/web not cached: %v", err)
	}
	got := obj.(*convertedService)
	if diff := cmp.Diff(map[string]string{policy.AnnotationScheduler: "wrr"}, got.conv.Annotations); diff != "" || got.GetLabels() != nil {
		t.Errorf("cached Service: labels %v, annotations (-want +got):\n%s", got.GetLabels(), diff)
	}
	calls := tp.dp.snapshot()
	if len(calls) == 0 || len(calls[0].plan.VirtualServers) != 1 {
		t.Fatalf("first sync %+v, want one virtual server", calls)
	}
	if vs := calls[0].plan.VirtualServers[0]; vs.Scheduler != "wrr" || len(vs.Destinations) != 1 {
		t.Errorf("virtual server %+v, want scheduler wrr and one destination", vs)
	}
}

// The trigger time annotation is read once, at conversion: a valid one
// is kept as a time, an unparsable one as its text and why, and none is
// neither; the slice's identity is the cache's key and resync check.
func TestConvertedSliceKeepsTriggerAndIdentity(t *testing.T) {
	for _, tc := range []struct {
		name, annotation string
		wantTrigger      bool
		wantBad          string
	}{
		{name: "no annotation"},
		{name: "a valid trigger time is kept", annotation: "2026-11-24T10:00:00Z", wantTrigger: true},
		{name: "an unparsable one is kept as text", annotation: "yesterday", wantBad: "yesterday"},
		{name: "one past what nanoseconds since the epoch hold is kept as text", annotation: "2300-01-01T00:00:00Z", wantBad: "2300-01-01T00:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := slice("web-1", "web", ep{"10.1.0.1", testNode})
			s.ResourceVersion = "42"
			if tc.annotation != "" {
				s.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: tc.annotation}
			}
			c := newConvertedSlice(s)
			if got := c.trigger != 0; got != tc.wantTrigger {
				t.Errorf("trigger %v, want one: %v", c.trigger, tc.wantTrigger)
			}
			switch {
			case tc.wantBad == "" && c.bad != nil:
				t.Errorf("bad trigger %+v, want none", c.bad)
			case tc.wantBad != "" && (c.bad == nil || c.bad.value != tc.wantBad || c.bad.err == nil):
				t.Errorf("bad trigger %+v, want %q with its error", c.bad, tc.wantBad)
			}
			key, err := cache.MetaNamespaceKeyFunc(c)
			if err != nil || key != "default/web-1" || c.GetResourceVersion() != "42" {
				t.Errorf("key %q (%v), resource version %q; want default/web-1, 42", key, err, c.GetResourceVersion())
			}
		})
	}
}

// TestConvertedObjectsKeepAUIDOnlyWhereAnEventNamesThem: the cache holds
// one convertedSlice per EndpointSlice of the cluster, so it keeps no UID
// (no Event names a slice) and its wrapper fits a 96-byte size class
// besides the endpoints; a convertedService keeps its UID, which the
// Events that name the Service carry.
func TestConvertedObjectsKeepAUIDOnlyWhereAnEventNamesThem(t *testing.T) {
	const uid = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
	s := slice("web-1", "web", ep{"10.1.0.1", testNode})
	s.UID = uid
	s.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: "2026-11-24T10:00:00Z"}
	if c := newConvertedSlice(s); c.GetUID() != "" {
		t.Errorf("the converted slice keeps UID %q", c.GetUID())
	}
	if size := unsafe.Sizeof(convertedSlice{}); size > 96 {
		t.Errorf("a convertedSlice is %d bytes, want at most 96", size)
	}
	svc := service("web", "10.96.0.10")
	svc.UID = uid
	c := newConvertedService(svc, serviceConv{})
	if c.GetUID() != uid || c.ref().UID != uid {
		t.Errorf("the converted Service's UID %q, its Events' %q; want %q", c.GetUID(), c.ref().UID, uid)
	}
}

// TestAllowServiceExternalIPsFalseDropsExternalIPs: with the feature gate
// AllowServiceExternalIPs=false a Service's spec.externalIPs are not
// served, as kube-proxy's ServicePort.ExternalIPs; the rest of the
// Service is.
func TestAllowServiceExternalIPsFalseDropsExternalIPs(t *testing.T) {
	svc := service("web", "10.96.0.10")
	svc.Spec.ExternalIPs = []string{"203.0.113.10"}
	for _, tc := range []struct {
		name string
		conv serviceConv
		want []netip.Addr
	}{
		{name: "served by default", want: []netip.Addr{netip.MustParseAddr("203.0.113.10")}},
		{name: "dropped with AllowServiceExternalIPs=false", conv: serviceConv{dropExternalIPs: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newConvertedService(svc, tc.conv)
			if c.err != nil {
				t.Fatal(c.err)
			}
			if diff := cmp.Diff(tc.want, c.conv.ExternalIPs, cmpopts.EquateEmpty(), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("ExternalIPs (-want +got):\n%s", diff)
			}
			if len(c.conv.ClusterIPs) != 1 {
				t.Errorf("ClusterIPs %v, want the one cluster IP", c.conv.ClusterIPs)
			}
		})
	}
}
