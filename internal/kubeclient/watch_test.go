package kubeclient

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// patience bounds the wait for something that must happen; a test that
// reaches it fails.
const patience = 20 * time.Second

// objectOf is an object of the resource, with name and resource version.
func objectOf(resource, name, rv string) runtime.Object {
	om := metav1.ObjectMeta{Name: name, ResourceVersion: rv}
	switch resource {
	case "services":
		om.Namespace = "ns"
		return &corev1.Service{ObjectMeta: om}
	case "endpointslices":
		om.Namespace = "ns"
		return &discoveryv1.EndpointSlice{ObjectMeta: om, AddressType: discoveryv1.AddressTypeIPv4}
	}
	return &corev1.Node{ObjectMeta: om}
}

// drain reads w's events until the server ends the stream.
func drain(t *testing.T, w watch.Interface) []watch.Event {
	t.Helper()
	var got []watch.Event
	timeout := time.After(patience)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return got
			}
			got = append(got, ev)
		case <-timeout:
			w.Stop()
			var types []watch.EventType
			for _, ev := range got {
				types = append(types, ev.Type)
			}
			t.Fatalf("the watch did not end with the server's stream; events so far: %v", types)
		}
	}
}

func TestWatchDecodesEachEventIntoTheResourcesTypeAndEndsWithTheStream(t *testing.T) {
	for _, resource := range []struct{ name, path string }{
		{"services", "/api/v1/services"},
		{"endpointslices", "/apis/discovery.k8s.io/v1/endpointslices"},
		{"nodes", "/api/v1/nodes"},
	} {
		for _, contentType := range []string{protobuf, jsonType} {
			t.Run(resource.name+" in "+contentType, func(t *testing.T) {
				checkWatch(t, resource.name, resource.path, contentType)
			})
		}
	}
}

// checkWatch watches resource over a server that streams one event of
// each type and ends the stream, and checks the events and the request.
func checkWatch(t *testing.T, resource, path, contentType string) {
	sent := []watch.EventType{watch.Added, watch.Modified, watch.Bookmark, watch.Deleted}
	srv, rec := serve(t, func(w http.ResponseWriter, r *http.Request) {
		s := startWatch(w, r)
		for i, typ := range sent {
			name := "obj"
			if typ == watch.Bookmark {
				name = "" // a bookmark carries only a resource version
			}
			s.send(t, watch.Event{Type: typ, Object: objectOf(resource, name, strconv.Itoa(6+i))})
		}
	})
	c := newTestClient(t, srv, func(cfg *rest.Config) { cfg.ContentType = contentType })
	lw := listerWatcher(c, resource, func(o *metav1.ListOptions) { o.LabelSelector = "a=b" })
	w, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{
		ResourceVersion: "5", AllowWatchBookmarks: true, TimeoutSeconds: ptr.To[int64](300),
	})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	got := drain(t, w)
	if len(got) != len(sent) {
		t.Fatalf("%d events, want %d: %v", len(got), len(sent), got)
	}
	wantType := fmt.Sprintf("%T", objectOf(resource, "", ""))
	for i, ev := range got {
		if ev.Type != sent[i] {
			t.Errorf("event %d is %s, want %s", i, ev.Type, sent[i])
		}
		if gotType := fmt.Sprintf("%T", ev.Object); gotType != wantType {
			t.Errorf("event %d decoded as %s, want %s", i, gotType, wantType)
			continue
		}
		m, _ := meta.Accessor(ev.Object)
		if m.GetResourceVersion() != strconv.Itoa(6+i) {
			t.Errorf("event %d at resource version %q, want %d", i, m.GetResourceVersion(), 6+i)
		}
	}
	req := rec.all()[0]
	if req.path != path || !strings.HasPrefix(req.accept, contentType) {
		t.Errorf("watch of %s accepting %q, want %s accepting %s", req.path, req.accept, path, contentType)
	}
	for k, want := range map[string]string{
		"watch": "true", "resourceVersion": "5", "allowWatchBookmarks": "true",
		"labelSelector": "a=b", "timeoutSeconds": "300", "timeout": "5m0s",
	} {
		if got := req.query.Get(k); got != want {
			t.Errorf("query %s=%q, want %q (query %s)", k, got, want, req.query.Encode())
		}
	}
}

func TestWatchOfACompactedResourceVersionReportsGone(t *testing.T) {
	gone := &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: "too old resource version: 5 (9)"}
	for _, tc := range []struct {
		name  string
		serve func(t *testing.T, w http.ResponseWriter, r *http.Request)
	}{
		{"as the watch's HTTP status", func(t *testing.T, w http.ResponseWriter, r *http.Request) {
			writeObject(t, w, r, http.StatusGone, gone)
		}},
		{"as an ERROR event in the stream", func(t *testing.T, w http.ResponseWriter, r *http.Request) {
			startWatch(w, r).send(t, watch.Event{Type: watch.Error, Object: gone})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := serve(t, func(w http.ResponseWriter, r *http.Request) { tc.serve(t, w, r) })
			c := newTestClient(t, srv, nil)
			w, err := withContext(c.Nodes(nil)).WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "5"})
			if err == nil {
				events := drain(t, w)
				if len(events) != 1 || events[0].Type != watch.Error {
					t.Fatalf("events %v, want one ERROR", events)
				}
				err = apierrors.FromObject(events[0].Object)
			}
			// The reflector relists from scratch on exactly these errors.
			if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
				t.Errorf("error %v (%T), want the API's Expired or Gone", err, err)
			}
		})
	}
}

// compactingServer is an API server of Nodes whose history is compacted
// once the first initial state is served: node-a at resource version 5
// becomes node-b at 9, and any request for a version before 9 is
// answered 410 Gone, as kube-apiserver answers after a compaction.
type compactingServer struct {
	t        *testing.T
	inStream bool // a watch's 410 comes as an ERROR event, not as the HTTP status

	mu        sync.Mutex
	compacted bool
	initials  []string // each initial-state request: "list@" or "watch@" and the version asked
}

func (s *compactingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	isWatch, initial := q.Get("watch") == "true", q.Get("watch") != "true" || q.Get("sendInitialEvents") == "true"
	s.mu.Lock()
	first := !s.compacted
	node, rv := "node-a", "5"
	if s.compacted {
		node, rv = "node-b", "9"
	}
	asked, _ := strconv.Atoi(q.Get("resourceVersion"))
	expired := s.compacted && asked > 0 && asked < 9
	if initial && !expired {
		verb := "list@"
		if isWatch {
			verb = "watch@"
		}
		s.initials = append(s.initials, verb+q.Get("resourceVersion"))
		s.compacted = true // the next requests find history compacted
	}
	s.mu.Unlock()

	if expired {
		gone := &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: "too old resource version: " + q.Get("resourceVersion") + " (9)"}
		if isWatch && s.inStream {
			startWatch(w, r).send(s.t, watch.Event{Type: watch.Error, Object: gone})
			return
		}
		writeObject(s.t, w, r, http.StatusGone, gone)
		return
	}
	if !isWatch {
		writeObject(s.t, w, r, http.StatusOK, &corev1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: rv}, Items: []corev1.Node{*objectOf("nodes", node, rv).(*corev1.Node)}})
		return
	}
	stream := startWatch(w, r)
	if initial {
		stream.send(s.t, watch.Event{Type: watch.Added, Object: objectOf("nodes", node, rv)})
		stream.send(s.t, watch.Event{Type: watch.Bookmark, Object: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			ResourceVersion: rv, Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}})
	}
	if first {
		return // the stream ends; the client watches on from 5, which is gone
	}
	<-r.Context().Done()
}

func (s *compactingServer) initialRequests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.initials...)
}

func TestInformerRelistsFromScratchWhenTheWatchsVersionIsGone(t *testing.T) {
	for _, tc := range []struct {
		name      string
		watchList bool // the reflector's initial state by a watch with initial events, not a list
		inStream  bool
		initials  []string
	}{
		{"watch-list, 410 status", true, false, []string{"watch@", "watch@"}},
		{"watch-list, 410 event", true, true, []string{"watch@", "watch@"}},
		{"list and watch, 410 status", false, false, []string{"list@0", "list@"}},
		{"list and watch, 410 event", false, true, []string{"list@0", "list@"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, tc.watchList)
			fake := &compactingServer{t: t, inStream: tc.inStream}
			srv, _ := serve(t, fake.ServeHTTP)
			c := newTestClient(t, srv, nil)

			// As proxier/informers.go builds its informers over this client.
			inf := cache.NewSharedIndexInformerWithOptions(c.Nodes(func(*metav1.ListOptions) {}), &corev1.Node{},
				cache.SharedIndexInformerOptions{Indexers: cache.Indexers{}})
			seen := make(chan string, 16)
			name := func(obj any) string {
				if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				return obj.(*corev1.Node).Name
			}
			if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc:    func(obj any) { seen <- "add " + name(obj) },
				UpdateFunc: func(_, obj any) { seen <- "update " + name(obj) },
				DeleteFunc: func(obj any) { seen <- "delete " + name(obj) },
			}); err != nil {
				t.Fatalf("add handler: %v", err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() { inf.RunWithContext(ctx) })
			defer wg.Wait()
			defer cancel()

			want := []string{"add node-a", "delete node-a", "add node-b"}
			timeout := time.After(patience)
			for i := 0; i < len(want); i++ {
				select {
				case got := <-seen:
					if got != want[i] {
						t.Fatalf("handler event %d %q, want %q (of %v)", i, got, want[i], want)
					}
				case <-timeout:
					t.Fatalf("after %d of %v, no more handler events; initial-state requests %q",
						i, want, fake.initialRequests())
				}
			}
			// The relist asked for the newest state, not the compacted 5;
			// with watch-list on, the client streams the initial state, as
			// a typed client does.
			if got := fake.initialRequests(); !slices.Equal(got, tc.initials) {
				t.Errorf("initial-state requests %q, want %q", got, tc.initials)
			}
		})
	}
}
