package proxier

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// drain returns the events recorded so far.
func (tp *testProxier) drainEvents() []string {
	out := []string{}
	for {
		select {
		case e := <-tp.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestAnnotationEvents(t *testing.T) {
	const badScheduler = `Warning InvalidAnnotation annotation kube-ipvs-proxy.io/scheduler: unknown scheduler "bogus"; using rr`
	tp := newTestProxier(t, nil)
	steps := []struct {
		name        string
		annotations map[string]string
		delete      bool
		want        []string
	}{
		{name: "an invalid annotation emits one event",
			annotations: map[string]string{policy.AnnotationScheduler: "bogus"},
			want:        []string{badScheduler}},
		{name: "the same problem again emits nothing",
			annotations: map[string]string{policy.AnnotationScheduler: "bogus", "example.com/other": "x"},
			want:        []string{}},
		{name: "a different message emits again",
			annotations: map[string]string{policy.AnnotationScheduler: "wrong"},
			want:        []string{`Warning InvalidAnnotation annotation kube-ipvs-proxy.io/scheduler: unknown scheduler "wrong"; using rr`}},
		{name: "a fixed annotation emits nothing",
			annotations: map[string]string{policy.AnnotationScheduler: "wrr"},
			want:        []string{}},
		{name: "a problem coming back emits again",
			annotations: map[string]string{policy.AnnotationScheduler: "bogus"},
			want:        []string{badScheduler}},
		{name: "an unknown annotation is named",
			annotations: map[string]string{policy.AnnotationScheduler: "bogus", policy.AnnotationPrefix + "nope": "1"},
			want:        []string{"Warning InvalidAnnotation annotation kube-ipvs-proxy.io/nope: unknown annotation; ignored"}},
		{name: "an invalid Service update changes nothing",
			annotations: map[string]string{policy.AnnotationScheduler: "bogus", "bad": "cluster IP"},
			want:        []string{}},
		{name: "a deleted and recreated service emits again",
			delete:      true,
			annotations: map[string]string{policy.AnnotationScheduler: "bogus"},
			want:        []string{badScheduler}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.delete {
				tp.delSvc("web")
			}
			svc := service("web", "10.96.0.10")
			if st.annotations["bad"] != "" {
				svc.Spec.ClusterIPs = []string{"10.96.0.10", "bogus"}
			}
			svc.Annotations = st.annotations
			tp.svc(svc)
			if got := tp.drainEvents(); !cmp.Equal(got, st.want) {
				t.Errorf("events:\n got %q\nwant %q", got, st.want)
			}
		})
	}
}

func TestAnnotationName(t *testing.T) {
	for _, tc := range []struct {
		field, want string
		ok          bool
	}{
		{"metadata.annotations[kube-ipvs-proxy.io/scheduler]", "kube-ipvs-proxy.io/scheduler", true},
		{"metadata.annotations[example.com/x]", "", false},
		{"spec.ports[http]", "", false},
		{"", "", false},
	} {
		t.Run(tc.field, func(t *testing.T) {
			got, ok := annotationName(tc.field)
			if got != tc.want || ok != tc.ok {
				t.Errorf("annotationName(%q) = %q, %v; want %q, %v", tc.field, got, ok, tc.want, tc.ok)
			}
		})
	}
}
