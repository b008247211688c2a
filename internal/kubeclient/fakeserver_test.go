package kubeclient

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	restwatch "k8s.io/client-go/rest/watch"
)

// The fake API server of these tests: an httptest server that records
// every request and answers in the media type the request's Accept
// header names first, encoded as kube-apiserver encodes it (the same
// codecs, the same watch framing).

const (
	protobuf = "application/vnd.kubernetes.protobuf"
	jsonType = "application/json"
)

// seen is one request as the server received it.
type seen struct {
	method, path        string
	query               url.Values
	accept, contentType string
	userAgent           string
	body                []byte
}

// recorder keeps the requests a server received, in order.
type recorder struct {
	mu   sync.Mutex
	reqs []seen
}

func (rec *recorder) all() []seen {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]seen(nil), rec.reqs...)
}

// serve starts a fake API server whose answers h writes, and returns it
// with the record of its requests.
func serve(t *testing.T, h http.HandlerFunc) (*httptest.Server, *recorder) {
	t.Helper()
	rec := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read the request body of %s %s: %v", r.Method, r.URL, err)
		}
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, seen{
			method: r.Method, path: r.URL.Path, query: r.URL.Query(),
			accept: r.Header.Get("Accept"), contentType: r.Header.Get("Content-Type"),
			userAgent: r.Header.Get("User-Agent"), body: body,
		})
		rec.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, rec
}

// newTestClient is a Client of srv with the configuration edit makes
// (nil: the defaults but protobuf, as the proxy's own defaults).
func newTestClient(t *testing.T, srv *httptest.Server, edit func(*rest.Config)) *Client {
	t.Helper()
	cfg := &rest.Config{Host: srv.URL}
	cfg.ContentType = protobuf
	if edit != nil {
		edit(cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// groupOf is the API group version a request's path is in.
func groupOf(r *http.Request) schema.GroupVersion {
	if strings.HasPrefix(r.URL.Path, "/apis/discovery.k8s.io/") {
		return discoveryv1.SchemeGroupVersion
	}
	return corev1.SchemeGroupVersion
}

// answerType is the media type the server answers r in: the first
// that r accepts, JSON when that is */* or absent.
func answerType(r *http.Request) runtime.SerializerInfo {
	first, _, _ := strings.Cut(r.Header.Get("Accept"), ",")
	mt := jsonType
	if strings.HasPrefix(strings.TrimSpace(first), protobuf) {
		mt = protobuf
	}
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mt)
	if !ok {
		panic("no serializer for " + mt)
	}
	return info
}

// writeObject answers r with obj and the HTTP status code.
func writeObject(t *testing.T, w http.ResponseWriter, r *http.Request, code int, obj runtime.Object) {
	t.Helper()
	info := answerType(r)
	body, err := runtime.Encode(codecs.EncoderForVersion(info.Serializer, groupOf(r)), obj)
	if err != nil {
		t.Errorf("encode %T: %v", obj, err)
		return
	}
	w.Header().Set("Content-Type", info.MediaType)
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// watchStream writes watch events on r's response, each flushed as it
// is written, in the framing of the media type r accepts.
type watchStream struct {
	enc   *restwatch.Encoder
	flush func()
}

func startWatch(w http.ResponseWriter, r *http.Request) *watchStream {
	info := answerType(r)
	ct := info.MediaType
	if info.MediaType == protobuf {
		ct += ";stream=watch"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	flusher.Flush()
	frames := info.StreamSerializer.Framer.NewFrameWriter(w)
	enc := restwatch.NewEncoder(streaming.NewEncoder(frames, info.StreamSerializer.Serializer),
		codecs.EncoderForVersion(info.Serializer, groupOf(r)))
	return &watchStream{enc: enc, flush: flusher.Flush}
}

func (s *watchStream) send(t *testing.T, ev watch.Event) {
	t.Helper()
	if err := s.enc.Encode(&ev); err != nil {
		t.Errorf("encode the %s event: %v", ev.Type, err)
	}
	s.flush()
}

// decodeBody decodes a request body in the content type it was sent in.
func decodeBody(t *testing.T, req seen, into runtime.Object) {
	t.Helper()
	mt, _, _ := strings.Cut(req.contentType, ";")
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mt)
	if !ok {
		t.Fatalf("%s %s: body in content type %q, which no serializer reads", req.method, req.path, req.contentType)
	}
	if _, _, err := info.Serializer.Decode(req.body, nil, into); err != nil {
		t.Fatalf("%s %s: decode the %s body: %v", req.method, req.path, mt, err)
	}
}
