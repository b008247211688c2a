//go:build !integration

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/kubeclient"
)

// TestKubeclientReadsAndWritesAsTheClientsetDoes holds the proxy's own
// API client to client-go's Clientset on a real apiserver, in both
// content types the proxy may be configured with: the same objects
// listed, with the list options applied; a watch that sees a change; the
// same Node read; and Events written, updated and patched in their own
// namespace through the sink the event broadcaster uses.
func TestKubeclientReadsAndWritesAsTheClientsetDoes(t *testing.T) {
	c, admin := startWithWeb(t)
	ctx := context.Background()
	if _, err := admin.DiscoveryV1().EndpointSlices("default").Create(ctx, webSlice(endpoint{"10.0.1.1", nodeName, "zone-a"}),
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Nodes().Create(ctx, node("other", "zone-b", "192.0.2.2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	list := func(obj runtime.Object, err error) runtime.Object {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return obj
	}
	for _, ct := range []struct{ name, contentType string }{
		{"protobuf", "application/vnd.kubernetes.protobuf"},
		{"json", "application/json"},
	} {
		t.Run(ct.name, func(t *testing.T) {
			cfg := c.AdminConfig()
			cfg.ContentType = ct.contentType
			kc, err := kubeclient.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				name string
				lw   cache.ListerWatcher
				want runtime.Object
			}{
				{"services", kc.Services(nil), list(admin.CoreV1().Services("").List(ctx, metav1.ListOptions{}))},
				{"endpoint slices", kc.EndpointSlices(nil), list(admin.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{}))},
				{"nodes, one by field selector", kc.Nodes(func(o *metav1.ListOptions) {
					o.FieldSelector = fields.OneTermEqualSelector("metadata.name", nodeName).String()
				}), list(admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + nodeName}))},
			} {
				got, err := cache.ToListerWatcherWithContext(tc.lw).ListWithContext(ctx, metav1.ListOptions{})
				if err != nil {
					t.Fatalf("%s: list: %v", tc.name, err)
				}
				if d := cmp.Diff(items(t, tc.want), items(t, got)); d != "" {
					t.Errorf("%s listed unlike the clientset (-clientset +kubeclient):\n%s", tc.name, d)
				}
			}

			n, err := kc.Node(ctx, nodeName)
			if err != nil {
				t.Fatal(err)
			}
			if n.Name != nodeName || n.Labels["kubernetes.io/hostname"] != nodeName {
				t.Errorf("Node(%s) read %s with labels %v", nodeName, n.Name, n.Labels)
			}

			w, err := cache.ToListerWatcherWithContext(kc.Services(nil)).WatchWithContext(ctx,
				metav1.ListOptions{ResourceVersion: listRV(t, list(admin.CoreV1().Services("default").List(ctx, metav1.ListOptions{})))})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			svc := webService()
			svc.Name, svc.Spec.ClusterIP = "watched-"+ct.name, ""
			if _, err := admin.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			select {
			case ev := <-w.ResultChan():
				if s, ok := ev.Object.(*corev1.Service); ev.Type != apiwatch.Added || !ok || s.Name != svc.Name {
					t.Errorf("watch saw %s %T, want ADDED Service %s", ev.Type, ev.Object, svc.Name)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the watch saw no event in 30 s")
			}

			sink := kc.EventSink()
			ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web." + ct.name, Namespace: "default"},
				InvolvedObject: corev1.ObjectReference{Kind: "Service", Namespace: "default", Name: "web"},
				Reason:         "Tested", Message: "created", Type: corev1.EventTypeNormal, Count: 1}
			created, err := sink.Create(ev)
			if err != nil {
				t.Fatal(err)
			}
			created.Message = "updated"
			if _, err := sink.Update(created); err != nil {
				t.Fatal(err)
			}
			if _, err := sink.Patch(created, []byte(`{"count":3}`)); err != nil {
				t.Fatal(err)
			}
			got, err := admin.CoreV1().Events("default").Get(ctx, ev.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Message != "updated" || got.Count != 3 {
				t.Errorf("event %s reads message %q count %d, want updated and 3", ev.Name, got.Message, got.Count)
			}
		})
	}
}

// items are a list's objects, without the type meta a typed client
// drops and a REST client keeps.
func items(t *testing.T, list runtime.Object) []runtime.Object {
	t.Helper()
	objs, err := meta.ExtractList(list)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		o.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	}
	return objs
}

// listRV is a list's resource version.
func listRV(t *testing.T, list runtime.Object) string {
	t.Helper()
	a, err := meta.ListAccessor(list)
	if err != nil {
		t.Fatal(err)
	}
	return a.GetResourceVersion()
}
