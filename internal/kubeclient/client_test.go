package kubeclient

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

// listOf is the list the fake server answers for a resource's path.
func listOf(path string) runtime.Object {
	meta := metav1.ListMeta{ResourceVersion: "42", Continue: "next-page"}
	switch {
	case strings.HasSuffix(path, "/services"):
		return &corev1.ServiceList{ListMeta: meta, Items: []corev1.Service{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "svc", ResourceVersion: "41"}}}}
	case strings.HasSuffix(path, "/endpointslices"):
		return &discoveryv1.EndpointSliceList{ListMeta: meta, Items: []discoveryv1.EndpointSlice{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "svc-x1", ResourceVersion: "41"}, AddressType: discoveryv1.AddressTypeIPv4}}}
	case strings.HasSuffix(path, "/nodes"):
		return &corev1.NodeList{ListMeta: meta, Items: []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node-a", ResourceVersion: "41"}}}}
	}
	return nil
}

// listerWatcher is c's list watcher of resource, as the reflector calls it.
func listerWatcher(c *Client, resource string, modify func(*metav1.ListOptions)) cache.ListerWatcherWithContext {
	return withContext(map[string]func(func(*metav1.ListOptions)) cache.ListerWatcher{
		"services": c.Services, "endpointslices": c.EndpointSlices, "nodes": c.Nodes,
	}[resource](modify))
}

// withContext is lw as the reflector calls it.
func withContext(lw cache.ListerWatcher) cache.ListerWatcherWithContext {
	return cache.ToListerWatcherWithContext(lw)
}

// serveLists answers every list with listOf its path.
func serveLists(t *testing.T) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		if l := listOf(r.URL.Path); l != nil {
			writeObject(t, w, r, http.StatusOK, l)
			return
		}
		writeObject(t, w, r, http.StatusNotFound, &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound})
	}
}

// itemName is the name of the one item of a list from listOf.
func itemName(t *testing.T, obj runtime.Object) (name, continueToken string) {
	t.Helper()
	switch l := obj.(type) {
	case *corev1.ServiceList:
		return l.Items[0].Name, l.Continue
	case *discoveryv1.EndpointSliceList:
		return l.Items[0].Name, l.Continue
	case *corev1.NodeList:
		return l.Items[0].Name, l.Continue
	}
	t.Fatalf("list decoded as %T", obj)
	return "", ""
}

func TestListsAskEveryNamespaceAtTheTypedClientsPathWithTheOptionsModifySets(t *testing.T) {
	srv, rec := serve(t, serveLists(t))
	c := newTestClient(t, srv, nil)
	selectors := func(o *metav1.ListOptions) { o.LabelSelector, o.FieldSelector = "a=b", "metadata.name!=x" }
	for _, tc := range []struct {
		name, path, item string
		lw               cache.ListerWatcherWithContext
	}{
		{"services", "/api/v1/services", "svc", withContext(c.Services(selectors))},
		{"endpointslices", "/apis/discovery.k8s.io/v1/endpointslices", "svc-x1", withContext(c.EndpointSlices(selectors))},
		{"nodes", "/api/v1/nodes", "node-a", withContext(c.Nodes(selectors))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(rec.all())
			// The reflector's pager asks pages with limit and continue; the
			// client passes them on and returns the next page's token.
			obj, err := tc.lw.ListWithContext(context.Background(), metav1.ListOptions{
				ResourceVersion: "40", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
				Limit: 500, Continue: "this-page",
			})
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			if name, cont := itemName(t, obj); name != tc.item || cont != "next-page" {
				t.Errorf("list decoded item %q continue %q, want %q and %q", name, cont, tc.item, "next-page")
			}
			reqs := rec.all()[before:]
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			req := reqs[0]
			if req.method != http.MethodGet || req.path != tc.path {
				t.Errorf("request %s %s, want GET %s", req.method, req.path, tc.path)
			}
			for k, want := range map[string]string{
				"labelSelector": "a=b", "fieldSelector": "metadata.name!=x", "resourceVersion": "40",
				"resourceVersionMatch": "NotOlderThan", "limit": "500", "continue": "this-page", "watch": "",
			} {
				if got := req.query.Get(k); got != want {
					t.Errorf("query %s=%q, want %q (query %s)", k, got, want, req.query.Encode())
				}
			}
		})
	}
}

func TestListNegotiatesTheConfiguredContentType(t *testing.T) {
	for _, tc := range []struct {
		name                string
		contentType, accept string
		wantAccept          string
	}{
		{"protobuf, the proxy's default", protobuf, "", protobuf + ", */*"},
		{"json", jsonType, "", jsonType + ", */*"},
		{"protobuf requests, json answers", protobuf, jsonType, jsonType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, rec := serve(t, serveLists(t))
			c := newTestClient(t, srv, func(cfg *rest.Config) { cfg.ContentType, cfg.AcceptContentTypes = tc.contentType, tc.accept })
			obj, err := withContext(c.EndpointSlices(nil)).ListWithContext(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			if name, _ := itemName(t, obj); name != "svc-x1" {
				t.Errorf("decoded item %q, want svc-x1", name)
			}
			if got := rec.all()[0].accept; got != tc.wantAccept {
				t.Errorf("Accept %q, want %q", got, tc.wantAccept)
			}
		})
	}
}

func TestNodeReadsOneNodeByName(t *testing.T) {
	srv, rec := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/nodes/node-a" {
			writeObject(t, w, r, http.StatusNotFound, &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound, Message: "nodes not found"})
			return
		}
		writeObject(t, w, r, http.StatusOK, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"10.0.1.0/24"}}})
	})
	c := newTestClient(t, srv, nil)
	n, err := c.Node(context.Background(), "node-a")
	if err != nil {
		t.Fatalf("Node(node-a): %v", err)
	}
	if n.Name != "node-a" || len(n.Spec.PodCIDRs) != 1 || n.Spec.PodCIDRs[0] != "10.0.1.0/24" {
		t.Errorf("Node(node-a) = %s with pod CIDRs %v", n.Name, n.Spec.PodCIDRs)
	}
	if req := rec.all()[0]; req.method != http.MethodGet || !strings.HasPrefix(req.accept, protobuf) {
		t.Errorf("request %s Accept %q, want GET accepting protobuf", req.method, req.accept)
	}
	// A missing Node is the API's NotFound, which callers test for.
	if _, err := c.Node(context.Background(), "node-b"); !apierrors.IsNotFound(err) {
		t.Errorf("Node(node-b) error %v, want NotFound", err)
	}
}

func TestRequestsCarryTheConfiguredUserAgent(t *testing.T) {
	for _, tc := range []struct{ name, configured, want string }{
		{"configured", "kube-ipvs-proxy", "kube-ipvs-proxy"},
		{"client-go's default when none is", "", rest.DefaultKubernetesUserAgent()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, rec := serve(t, serveLists(t))
			c := newTestClient(t, srv, func(cfg *rest.Config) { cfg.UserAgent = tc.configured })
			for _, lw := range []cache.ListerWatcher{c.Services(nil), c.EndpointSlices(nil)} {
				if _, err := withContext(lw).ListWithContext(context.Background(), metav1.ListOptions{}); err != nil {
					t.Fatalf("list: %v", err)
				}
			}
			for _, req := range rec.all() {
				if req.userAgent != tc.want {
					t.Errorf("%s sent User-Agent %q, want %q", req.path, req.userAgent, tc.want)
				}
			}
		})
	}
}

func TestEventSinkWritesEachEventInItsOwnNamespace(t *testing.T) {
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "web", Name: "svc.17"},
		InvolvedObject: corev1.ObjectReference{Kind: "Service", Namespace: "web", Name: "svc"},
		Reason:         "Invalid", Message: "bad port", Type: corev1.EventTypeWarning, Count: 2,
	}
	for _, tc := range []struct {
		name, method, path, contentType string
		write                           func(record.EventSink) (*corev1.Event, error)
	}{
		{"create posts to the namespace's events", http.MethodPost, "/api/v1/namespaces/web/events", protobuf,
			func(s record.EventSink) (*corev1.Event, error) {
				return s.Create(ev)
			}},
		{"update puts the named event", http.MethodPut, "/api/v1/namespaces/web/events/svc.17", protobuf,
			func(s record.EventSink) (*corev1.Event, error) {
				return s.Update(ev)
			}},
		{"patch sends a strategic merge patch", http.MethodPatch, "/api/v1/namespaces/web/events/svc.17", "application/strategic-merge-patch+json",
			func(s record.EventSink) (*corev1.Event, error) {
				return s.Patch(ev, []byte(`{"count":3}`))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, rec := serve(t, func(w http.ResponseWriter, r *http.Request) {
				out := ev.DeepCopy()
				out.ResourceVersion = "7"
				writeObject(t, w, r, http.StatusCreated, out)
			})
			out, err := tc.write(newTestClient(t, srv, nil).EventSink())
			if err != nil {
				t.Fatalf("write: %v", err)
			}
			if out.Name != "svc.17" || out.ResourceVersion != "7" {
				t.Errorf("returned event %s at resource version %q, want svc.17 at 7", out.Name, out.ResourceVersion)
			}
			req := rec.all()[0]
			if req.method != tc.method || req.path != tc.path || req.contentType != tc.contentType {
				t.Fatalf("request %s %s in %q, want %s %s in %q", req.method, req.path, req.contentType, tc.method, tc.path, tc.contentType)
			}
			if tc.method == http.MethodPatch {
				if string(req.body) != `{"count":3}` {
					t.Errorf("patch body %q, want the patch as given", req.body)
				}
				return
			}
			var sent corev1.Event
			decodeBody(t, req, &sent)
			if sent.Name != ev.Name || sent.Namespace != "web" || sent.Reason != ev.Reason || sent.Message != ev.Message || sent.Count != 2 {
				t.Errorf("sent event %s/%s %s %q count %d, want the event as given", sent.Namespace, sent.Name, sent.Reason, sent.Message, sent.Count)
			}
		})
	}
}

// countingLimiter is a rate limiter that counts the requests that wait
// on it and never makes one wait.
type countingLimiter struct{ waits atomic.Int32 }

func (l *countingLimiter) TryAccept() bool                { return true }
func (l *countingLimiter) Accept()                        { l.waits.Add(1) }
func (l *countingLimiter) Stop()                          {}
func (l *countingLimiter) QPS() float32                   { return 0 }
func (l *countingLimiter) Wait(ctx context.Context) error { l.waits.Add(1); return ctx.Err() }

func TestEveryRequestOfBothGroupsWaitsOnTheConfiguredRateLimiter(t *testing.T) {
	srv, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/events") {
			writeObject(t, w, r, http.StatusCreated, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e"}})
			return
		}
		if strings.HasPrefix(r.URL.Path, "/api/v1/nodes/") {
			writeObject(t, w, r, http.StatusOK, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}})
			return
		}
		serveLists(t)(w, r)
	})
	limiter := &countingLimiter{}
	c := newTestClient(t, srv, func(cfg *rest.Config) { cfg.RateLimiter = limiter })
	ctx := context.Background()
	for _, do := range []func() error{
		func() error {
			_, err := withContext(c.Services(nil)).ListWithContext(ctx, metav1.ListOptions{})
			return err
		},
		func() error {
			_, err := withContext(c.EndpointSlices(nil)).ListWithContext(ctx, metav1.ListOptions{})
			return err
		},
		func() error {
			_, err := withContext(c.Nodes(nil)).ListWithContext(ctx, metav1.ListOptions{})
			return err
		},
		func() error { _, err := c.Node(ctx, "node-a"); return err },
		func() error {
			_, err := c.EventSink().Create(&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "e"}})
			return err
		},
	} {
		if err := do(); err != nil {
			t.Fatalf("request: %v", err)
		}
	}
	if got := limiter.waits.Load(); got != 5 {
		t.Errorf("%d requests waited on the limiter, want all 5", got)
	}
}

func TestQPSAndBurstMakeOneTokenBucketSharedByBothGroups(t *testing.T) {
	srv, rec := serve(t, serveLists(t))
	// At 0.01 QPS a token comes back after 100 s: within the test, only
	// the burst is spent, whatever the machine's speed.
	c := newTestClient(t, srv, func(cfg *rest.Config) { cfg.QPS, cfg.Burst = 0.01, 3 })
	core, discovery := c.core.GetRateLimiter(), c.discovery.GetRateLimiter()
	if core == nil || core != discovery {
		t.Fatalf("core limiter %p, discovery limiter %p: want one, shared", core, discovery)
	}
	if core.QPS() != 0.01 {
		t.Errorf("limiter QPS %v, want 0.01", core.QPS())
	}
	// Within the burst, requests go at once (patience stops a client
	// whose burst is smaller from waiting 100 s for a token).
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	for _, lw := range []cache.ListerWatcher{c.Services(nil), c.EndpointSlices(nil), c.Nodes(nil)} {
		if _, err := withContext(lw).ListWithContext(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("request %d of a burst of 3: %v", len(rec.all())+1, err)
		}
	}
	// The three requests spent the burst of 3, across both groups.
	if discovery.TryAccept() {
		t.Errorf("a token was left after %d requests with a burst of 3", len(rec.all()))
	}
}

func TestQPSWithoutBurstIsRefused(t *testing.T) {
	_, err := New(&rest.Config{Host: "http://127.0.0.1:1", QPS: 5})
	if err == nil || !strings.Contains(err.Error(), "burst") {
		t.Errorf("New with QPS 5 and no burst: error %v, want one naming the burst", err)
	}
}

func TestConfigTimeoutBoundsEveryRequest(t *testing.T) {
	srv, _ := serve(t, serveLists(t))
	c := newTestClient(t, srv, func(cfg *rest.Config) { cfg.Timeout = 17 * time.Second })
	for name, ri := range map[string]rest.Interface{"core": c.core, "discovery": c.discovery} {
		rc, ok := ri.(*rest.RESTClient)
		if !ok {
			t.Fatalf("%s client is a %T", name, ri)
		}
		if rc.Client.Timeout != 17*time.Second {
			t.Errorf("%s HTTP client timeout %v, want the configured 17s", name, rc.Client.Timeout)
		}
	}
}

func TestListTimeoutSecondsIsTheRequestsTimeout(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	srv, rec := serve(t, func(w http.ResponseWriter, r *http.Request) {
		select { // answer only when the client gives up (or the test ends)
		case <-r.Context().Done():
		case <-block:
		}
	})
	c := newTestClient(t, srv, nil)
	// patience keeps a client that ignores the timeout from hanging the
	// test; the query below tells the two deadlines apart.
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	_, err := withContext(c.Services(nil)).ListWithContext(ctx, metav1.ListOptions{TimeoutSeconds: ptr.To[int64](1)})
	if err == nil {
		t.Fatalf("a list the server never answered returned no error")
	}
	if !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "deadline") && !strings.Contains(err.Error(), "Timeout") {
		t.Errorf("error %v, want the request's deadline", err)
	}
	req := rec.all()[0]
	if req.query.Get("timeoutSeconds") != "1" || req.query.Get("timeout") != "1s" {
		t.Errorf("query %s, want timeoutSeconds=1 and timeout=1s for the server", req.query.Encode())
	}
}
